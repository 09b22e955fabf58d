"""The protocol's tables and headers: api keys, message classes by api key, request/response headers.

Every request starts with a request header and every response with a response header:

- request header v1 (non-flexible request versions): api_key int16, api_version int16,
  correlation_id int32, client_id nullable string (int16 length);
- request header v2 (flexible request versions): the same, then tagged fields. The client_id stays a
  classic int16-length string, never a compact one;
- response header v0: correlation_id int32; v1 (flexible response versions): then tagged fields.
  ApiVersions responses always use v0, so that a client can read the reply whatever version it asked
  for.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from trafka.wire.messages import REQUESTS, RESPONSES, ApiKey
from trafka.wire.primitives import (
    INT16,
    DecodeError,
    EncodeError,
    Message,
    Writer,
    skip_tagged_fields,
)

__all__ = [
    "REQUESTS",
    "RESPONSES",
    "ApiKey",
    "DecodeError",
    "EncodeError",
    "Message",
    "RequestHeader",
    "Writer",
    "api_key_of",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "request_header_version",
    "response_header_version",
]

_REQUEST_HEADER_START = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_CORRELATION_ID = struct.Struct(">i")
_API_KEYS = {int(key): key for key in ApiKey}


@dataclass(slots=True)
class RequestHeader:
    api_key: int  # an ApiKey once decoded
    api_version: int
    correlation_id: int
    client_id: str | None


def api_key_of(value: int) -> ApiKey | None:
    """The ApiKey for a number, or None when trafka does not know that API."""
    return _API_KEYS.get(value)


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if REQUESTS[api_key].is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if RESPONSES[api_key].is_flexible(api_version) else 0


def decode_request_header(buf: memoryview) -> tuple[RequestHeader, int | None]:
    """Decodes the request header at the start of a frame; returns it and the offset of the body.

    The header version follows from the api key and version. When trafka's codec does not know them
    (unknown api key, version outside the message's range) the offset is None: a v2 header's tagged
    fields cannot be told apart from the body then, and there is no body to decode anyway.
    The api key is an ``ApiKey`` when known, else the plain number. Raises ``DecodeError`` when the
    header is truncated.
    """
    try:
        api_key, api_version, correlation_id = _REQUEST_HEADER_START.unpack_from(buf, 0)
        (length,) = INT16.unpack_from(buf, 8)
    except struct.error:
        raise DecodeError(f"request header truncated ({len(buf)} bytes)") from None
    pos = 10
    if length < 0:
        client_id = None
    else:
        if pos + length > len(buf):
            raise DecodeError(
                f"request header client_id of {length} bytes runs past the end of the frame "
                f"({len(buf)} bytes)"
            )
        # Like Kafka, be lenient with a client id that is not valid UTF-8.
        client_id = str(buf[pos : pos + length], "utf-8", "replace")
        pos += length
    key = _API_KEYS.get(api_key)
    header = RequestHeader(api_key if key is None else key, api_version, correlation_id, client_id)
    if key is None:
        return header, None
    request = REQUESTS[key]
    if not request.MIN_VERSION <= api_version <= request.MAX_VERSION:
        return header, None
    if request.is_flexible(api_version):
        try:
            pos = skip_tagged_fields(buf, pos)
        except IndexError:
            raise DecodeError("request header tagged fields truncated") from None
    return header, pos


def encode_request_header(w: Writer, header: RequestHeader) -> None:
    """Writes a request header (v1 or v2, as the api key and version call for); for clients and tests."""
    w += _REQUEST_HEADER_START.pack(header.api_key, header.api_version, header.correlation_id)
    if header.client_id is None:
        w += b"\xff\xff"
    else:
        client_id = header.client_id.encode()
        w += INT16.pack(len(client_id))
        w += client_id
    if request_header_version(header.api_key, header.api_version) == 2:
        w.append(0)  # no tagged fields


def encode_response_header(w: Writer, correlation_id: int, header_version: int) -> None:
    w += _CORRELATION_ID.pack(correlation_id)
    if header_version >= 1:
        w.append(0)  # no tagged fields


def decode_response_header(buf: memoryview, header_version: int) -> tuple[int, int]:
    """Decodes a response header: returns the correlation id and the offset of the body."""
    try:
        (correlation_id,) = _CORRELATION_ID.unpack_from(buf, 0)
        pos = skip_tagged_fields(buf, 4) if header_version >= 1 else 4
    except (struct.error, IndexError):
        raise DecodeError(f"response header truncated ({len(buf)} bytes)") from None
    return correlation_id, pos
