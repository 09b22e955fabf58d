"""``python -m trafka`` runs the ``trafka`` command.

Installed, trafka is one import package, ``trafka``, whose subpackages are the repository's layers
(pyproject.toml maps each folder to its name; this folder is the package's root, which holds nothing
else): ``trafka.wire``, the Kafka protocol, sans-I/O (``wire/``); ``trafka.storage``, the segmented log
on disk (``storage/``); ``trafka.broker``, the Trio server and everything stateful, the CLI, the pytest
plugin and ``trafka.broker.testing`` (``broker/``).
"""
import sys

from trafka.broker.tools.cli import main

sys.exit(main())
