"""Errors about single records of a batch (KIP-467): the summary Kafka puts above them."""
from trafka.wire.errors import ErrorCode, KafkaError, RecordError


def test_the_summary_counts_every_record_error_and_shows_three() -> None:
    errors = [RecordError(0, "no key"), RecordError(3, None), RecordError(5, "no key"), RecordError(9, "no key")]

    error = KafkaError.for_records(ErrorCode.INVALID_RECORD, errors)

    assert error.code == ErrorCode.INVALID_RECORD and error.record_errors == tuple(errors)
    assert error.message == (
        "One or more records have been rejected due to 4 record errors in total, and only showing the first "
        "three errors at most: [RecordError(batchIndex=0, message='no key'), RecordError(batchIndex=3, "
        "message=null), RecordError(batchIndex=5, message='no key')]")


def test_timestamp_errors_have_a_summary_of_their_own() -> None:
    error = KafkaError.for_records(ErrorCode.INVALID_TIMESTAMP, [RecordError(2, "too old")])

    assert error.message == "One or more records have been rejected due to invalid timestamp"
    assert error.record_errors == (RecordError(2, "too old"),)


def test_other_errors_name_no_records() -> None:
    assert KafkaError(ErrorCode.CORRUPT_MESSAGE, "bad CRC").record_errors == ()
