# The two set-up commands of the README, and their parts.
PYTHON ?= python3

.PHONY: run check install install-test test fuzz

# Install trafka (again only when pyproject.toml changed) and start one broker on 127.0.0.1:9092 with data
# in ./trafka-data; ARGS are the broker's own options: make run ARGS="--port 9093 --ephemeral".
ARGS ?=
run: .installed
	$(PYTHON) -m trafka $(ARGS)

.installed: pyproject.toml
	$(MAKE) install
	touch .installed

# Install everything the tests need (Python, npm and Debian packages) and run the whole suite.
check: install-test test

# An editable install leaves the sources uncompiled; byte-compile them as installing a wheel would,
# so that the broker starts in a quarter of a second from the first run on.
install:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e .
	$(PYTHON) -m compileall -q wire storage broker

install-test:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	bash compat_tests/setup.sh

# Test modules run in parallel, each whole on one worker (its broker fixtures are per module), in the
# order compat_tests/schedule.py gives them (the longest first), not reordered by their number of tests.
# Three workers on two cores: the compatibility tests spend most of their time waiting on brokers and
# clients (the cores are about half busy with two workers).
WORKERS ?= 3
test:
	$(PYTHON) -m pytest -n $(WORKERS) --dist loadfile --no-loadscope-reorder

# A long fuzz run: mutated frames of real clients against a broker process (FRAMES=100000 for a shorter one).
FRAMES ?= 1000000
fuzz:
	$(PYTHON) -m bench.fuzz --frames $(FRAMES)
