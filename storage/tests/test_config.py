"""Topic configs: Kafka's names, ranges and refusal messages."""
from __future__ import annotations

import pytest

from trafka.storage.config import LogConfig
from trafka.wire.errors import ErrorCode, KafkaError


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("segment.bytes", "big", "Invalid value big for configuration segment.bytes: Not a number of type INT"),
        ("segment.bytes", "3000000000",
         "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
        ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        ("min.cleanable.dirty.ratio", "half",
         "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
        ("cleanup.policy", "delete,shred",
         "Invalid value delete,shred for configuration cleanup.policy: String must be one of: compact, delete"),
    ],
)
def test_bad_values_are_refused_with_kafkas_message(name, value, message):
    with pytest.raises(KafkaError) as refused:
        LogConfig.from_properties({name: value})
    assert (refused.value.code, refused.value.message) == (ErrorCode.INVALID_CONFIG, message)


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts():
    config = LogConfig.from_properties({"cleanup.policy": ""})
    assert (config.cleanup_policy, config.delete, config.compact) == ("", False, False)
    assert LogConfig.from_properties({"cleanup.policy": "Compact, delete"}).cleanup_policy == "compact,delete"
