"""message.max.bytes: a batch just under the limit is stored, one just over is refused with
MESSAGE_TOO_LARGE, and the broker goes on serving the same client afterwards.

The limit (100000 bytes) is far below every client's own request-size limit (about 1 MB), so the
refusal must come from the broker.
"""

from __future__ import annotations

import pytest

from compat_tests.clients import CLIENTS, ClientError, Message, assert_round_trip
from compat_tests.harness import BrokerProcess

MESSAGE_MAX_BYTES = 100_000
#: A v2 batch of one record with a short key costs about 61 + 20 bytes on top of the value.
JUST_UNDER = MESSAGE_MAX_BYTES - 300
JUST_OVER = MESSAGE_MAX_BYTES + 300


@pytest.fixture(scope="module")
def small_broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("small") / "data", name="small-broker",
                            overrides={"message.max.bytes": MESSAGE_MAX_BYTES})
    yield process.start()
    process.close()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_message_max_bytes(small_broker, topic, client_for, client):
    name = topic(partitions=1, on=small_broker)
    adapter = client_for(client, small_broker)
    under = Message(key=b"under", value=b"u" * JUST_UNDER, partition=0)
    over = Message(key=b"over", value=b"o" * JUST_OVER, partition=0)
    after = Message(key=b"after", value=b"still working", partition=0)

    delivered = adapter.produce(name, [under])
    with pytest.raises(ClientError) as refused:
        adapter.produce(name, [over])
    assert refused.value.error == "MESSAGE_TOO_LARGE", refused.value
    delivered += adapter.produce(name, [after])

    consumed = CLIENTS["confluent-kafka"](small_broker.bootstrap).consume(name, 2)
    assert_round_trip([under, after], delivered, consumed)
