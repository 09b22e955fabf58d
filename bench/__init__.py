"""Benchmarks: trafka side by side with Tansu and librdkafka's mock cluster, driven by real clients.

Run ``python -m bench`` (or ``--quick``); see bench/README.md. Not part of the test suite.
"""
