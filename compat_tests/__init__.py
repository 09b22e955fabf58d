"""Compatibility tests: unmodified Kafka clients against a real trafka broker process."""
