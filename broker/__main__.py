"""``python -m broker`` runs the ``trafka`` command."""
import sys

from broker.cli import main

sys.exit(main())
