"""Framing, headers, and the public entry points over the generated codecs.

Request header v1 = api_key int16, api_version int16, correlation_id int32,
client_id (nullable int16-length string, never compact); v2 adds a tag buffer
and is used exactly when the request version is flexible.  Response header v0 =
correlation_id; v1 adds a tag buffer when the response version is flexible --
except ApiVersions, whose response header is always v0 so that a client can
parse it before it knows which versions the broker speaks.
"""
from __future__ import annotations

import struct
from typing import Any, Callable, NamedTuple, Sequence, TypeVar, cast

from samsa.protocol.errors import ProtocolError, UnsupportedVersionError
from samsa.protocol.messages import generated, overlay, wire
from samsa.protocol.messages.codegen import PREENCODABLE, get_decoder, get_encoder, get_struct_encoder
from samsa.protocol.messages.model import Message, Preencoded, link
from samsa.protocol.messages.schema import MessageSpec, message_from_rows, serves
from samsa.protocol.model import ApiKey

# classgen's command (generated.py's first line says it too)
REGENERATE = "python -m samsa.protocol.messages.classgen"

_HDR = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
# Exceptions that malformed bytes can provoke inside generated decoders.
_DECODE_ERRORS = (IndexError, struct.error, ValueError, OverflowError, TypeError)
_ENCODE_ERRORS = (struct.error, TypeError, AttributeError, OverflowError, UnicodeError)


# Bound once: looking a member up on the enum class costs on every frame.
_API_VERSIONS = ApiKey.API_VERSIONS


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


class ApiSpec(NamedTuple):
    key: int
    name: str
    min_version: int
    max_version: int
    request_cls: type[Message]
    response_cls: type[Message]


def _load_all() -> tuple[dict[str, type[Message]], dict[int, ApiSpec]]:
    """The generated classes (generated.py), linked to their specs, for what overlay.SERVED
    names; a file older than the overlay fails here rather than on some request later."""
    classes: dict[str, type[Message]] = {}
    by_key: dict[int, ApiSpec] = {}
    generated_apis = {api: (req, resp) for api, req, resp in generated.SERVED}
    for api_name, (key, lo, hi) in overlay.SERVED.items():
        if api_name not in generated_apis:
            raise ImportError(f"{api_name} is served but not in generated.py: "
                              f"run `{REGENERATE}`")
        for cls in generated_apis[api_name]:
            link(cls, message_from_rows(generated.SPECS[cls.__name__]))
            classes[cls.__name__] = cls
        req_cls, resp_cls = generated_apis[api_name]
        if not serves(req_cls._message, resp_cls._message, key, lo, hi):
            # overlay.SERVED widened without generating again
            raise ImportError(f"{api_name}: overlay.SERVED {(key, lo, hi)} is outside "
                              f"generated.py's specs: run `{REGENERATE}`")
        by_key[key] = ApiSpec(key, api_name, lo, hi, req_cls, resp_cls)
    return classes, by_key


MESSAGE_CLASSES, API_BY_KEY = _load_all()
# Fast path lookup for decode_request: key -> (min, max, request MessageSpec).
_SERVED = {k: (s.min_version, s.max_version, s.request_cls._message) for k, s in API_BY_KEY.items()}


def _as_view(frame: wire.Buf) -> memoryview:
    mv = frame if isinstance(frame, memoryview) else memoryview(frame)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible request versions, else 1 (v0, without client_id, is only
    ControlledShutdown v0, which samsa does not serve)."""
    spec = API_BY_KEY.get(api_key)
    if spec is not None and spec.request_cls._message.is_flexible(api_version):
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible response versions, else 0; always 0 for ApiVersions."""
    spec = API_BY_KEY.get(api_key)
    if api_key != _API_VERSIONS and spec is not None \
            and spec.response_cls._message.is_flexible(api_version):
        return 1
    return 0


def decode_request_header(frame: wire.Buf, header_version: int) -> tuple[RequestHeader, int]:
    """Parse a request header of the given version -> (RequestHeader, body offset).
    v0: key, version, correlation id; v1 adds the nullable int16 client_id (never
    compact); v2 adds a tag buffer."""
    buf = _as_view(frame)
    try:
        key, ver, corr = _HDR.unpack_from(buf, 0)
        pos = 8
        client_id = None
        if header_version >= 1:
            client_id, pos = wire.read_nstring(buf, pos)
        if header_version >= 2:
            pos = _skip_tag_buffer(buf, pos)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed request header: {e}") from None
    return RequestHeader(key, ver, corr, client_id), pos


def encode_request_header(hdr: RequestHeader, header_version: int) -> bytes:
    out = wire.Out((_HDR.pack(hdr.api_key, hdr.api_version, hdr.correlation_id),))
    if header_version >= 1:
        wire.write_nstring(hdr.client_id, out)
    if header_version >= 2:
        out.append(b"\x00")
    return b"".join(out)


def _skip_tag_buffer(buf: wire.Buf, pos: int) -> int:
    n, pos = wire.read_uvarint(buf, pos)
    if n:
        pos = wire.skip_tags(buf, pos, n)
    return pos


def decode_request(frame: wire.Buf, *, strict: bool = False) -> tuple[RequestHeader, Any]:
    """frame (without the 4-byte size) -> (RequestHeader, request object).

    Raises UnsupportedVersionError when the header is fine but the key/version is
    not served, ProtocolError for anything malformed.

    Trailing bytes after the body are ignored unless ``strict``: Apache Kafka's
    broker does not check that a request was consumed completely, and real
    clients rely on it -- librdkafka 2.16 sends its all-topics Metadata v13
    request with a 4-byte int32 topic count (00 00 00 00) where the flexible
    encoding has a 1-byte varint, leaving 3 bytes over that Kafka ignores."""
    buf = _as_view(frame)
    if len(buf) < 8:
        raise ProtocolError("request shorter than its header", len(buf))
    key, ver, corr = _HDR.unpack_from(buf, 0)
    served = _SERVED.get(key)
    if served is None:
        raise UnsupportedVersionError(key, ver, corr)
    if not served[0] <= ver <= served[1]:
        raise UnsupportedVersionError(key, ver, corr,
                                      f"{served[2].api_name} v{served[0]}-{served[1]}")
    msg = served[2]
    try:
        client_id, pos = wire.read_nstring(buf, 8)
        if msg.is_flexible(ver):
            pos = _skip_tag_buffer(buf, pos)
        obj, pos = get_decoder(msg, ver)(buf, pos)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed {msg.name} v{ver}: {e.__class__.__name__}: {e}") from None
    if strict and pos != len(buf):
        raise ProtocolError(f"{len(buf) - pos} trailing bytes after {msg.name} v{ver}", pos)
    return RequestHeader(key, ver, corr, client_id), obj


def _response_header(key: int, version: int, msg: MessageSpec, corr: int) -> bytes:
    if key != _API_VERSIONS and msg.is_flexible(version):
        return _I32.pack(corr) + b"\x00"
    return _I32.pack(corr)


def _check_version(msg: MessageSpec, version: int) -> None:
    if not msg.valid[0] <= version <= msg.valid[1]:
        raise ValueError(f"{msg.name} has no version {version}")


def encode_response(hdr: RequestHeader, resp: Message, version: int | None = None) -> list[Any]:
    """-> [bytes(size prefix + response header + body...), region, bytes, ...].

    Records values that are regions (not bytes-like, with an int ``length``) become
    their own parts so the caller can sendfile them; the size prefix counts them."""
    msg = type(resp)._message
    v = hdr.api_version if version is None else version
    _check_version(msg, v)
    out = wire.Out((b"", _response_header(hdr.api_key, v, msg, hdr.correlation_id)))
    try:
        get_encoder(msg, v)(resp, out)
    except _ENCODE_ERRORS as e:
        # A handler put a wrong-typed value (None in an int field, an int too large...):
        # say which message and version, so the broker's log line is actionable.
        raise ValueError(f"cannot encode {msg.name} v{v}: {e.__class__.__name__}: {e}") from e
    if not out.regions:
        out[0] = _I32.pack(sum(map(len, out)))
        return [b"".join(out)]
    parts = []
    total = 0
    start = 0
    for i in out.regions:
        chunk = b"".join(out[start:i])
        region = out[i]
        parts.append(chunk)
        parts.append(region)
        total += len(chunk) + region.length
        start = i + 1
    if start < len(out):
        tail = b"".join(out[start:])
        if tail:
            parts.append(tail)
            total += len(tail)
    parts[0] = _I32.pack(total) + parts[0]
    return parts


def encode_request(hdr: RequestHeader, req: Message) -> bytes:
    """Client side (tests, tools): size prefix + request header v1/v2 + body, as bytes.
    Records values must be bytes-like here."""
    msg = type(req)._message
    v = hdr.api_version
    _check_version(msg, v)
    out = wire.Out((b"", _HDR.pack(hdr.api_key, v, hdr.correlation_id)))
    wire.write_nstring(hdr.client_id, out)
    if msg.is_flexible(v):
        out.append(b"\x00")
    get_encoder(msg, v)(req, out)
    if out.regions:
        raise ValueError("encode_request does not take region records")
    out[0] = _I32.pack(sum(map(len, out)))
    return b"".join(out)


def decode_response(frame: wire.Buf, api_key: int, api_version: int) -> tuple[int, Any]:
    """Client side: response frame (without size) -> (correlation_id, response object)."""
    spec = API_BY_KEY.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(api_key, api_version, -1)
    msg = spec.response_cls._message
    if not msg.valid[0] <= api_version <= msg.valid[1]:
        raise UnsupportedVersionError(api_key, api_version, -1)
    buf = _as_view(frame)
    try:
        corr = _I32.unpack_from(buf, 0)[0]
        pos = 4
        if api_key != _API_VERSIONS and msg.is_flexible(api_version):
            pos = _skip_tag_buffer(buf, pos)
        obj, pos = get_decoder(msg, api_version)(buf, pos)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed {msg.name} v{api_version}: {e.__class__.__name__}: {e}") from None
    if pos != len(buf):
        raise ProtocolError(f"{len(buf) - pos} trailing bytes after {msg.name} v{api_version}", pos)
    return corr, obj


_M = TypeVar("_M", bound=Message)


def preencode(message: type[Message], element: _M, version: int) -> _M:
    """``element`` (a nested struct of ``message``, as an element of one of its arrays)
    encoded now for ``version``: put in the array, it is written as these bytes by that
    version's encoder, and read as ``element`` by everything else (model.Preencoded).
    Typed as the element it stands for, so a handler's list keeps its element type."""
    return preencoder(message, type(element), version)([element])[0]


def preencoder(message: type[Message], struct: type[_M], version: int
               ) -> Callable[[Sequence[_M]], list[_M]]:
    """``preencode`` of many ``struct`` elements for ``version`` at once, the checks
    made once and the parts written to one list: a Metadata answer preencodes
    thousands of partitions."""
    msg = message._message
    _check_version(msg, version)
    spec = struct._spec
    if spec is None or msg.structs.get(spec.name) is not spec:
        raise ValueError(f"{struct.__qualname__} is not a struct of {msg.name}")
    if (msg.name, spec.name) not in PREENCODABLE:
        raise ValueError(f"{msg.name}.{spec.name} is not in codegen.PREENCODABLE")
    encode = get_struct_encoder(msg, spec, version)
    join = b"".join

    def encoded(elements: Sequence[_M]) -> list[_M]:
        out = wire.Out()
        starts = []
        for element in elements:
            if element.__class__._spec is not spec:
                raise ValueError(f"{type(element).__qualname__} is not {struct.__qualname__}")
            starts.append(len(out))
            encode(element, out)
        if out.regions:
            raise ValueError("preencode does not take region records")
        starts.append(len(out))
        return [cast(_M, Preencoded(element, version, spec, join(out[starts[i]:starts[i + 1]])))
                for i, element in enumerate(elements)]
    return encoded


def decode_body(cls: type[Message], data: wire.Buf, version: int) -> Any:
    """Decode just a message body (no header) of class ``cls`` at ``version``."""
    msg = cls._message
    _check_version(msg, version)
    buf = _as_view(data)
    try:
        obj, pos = get_decoder(msg, version)(buf, 0)
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed {msg.name} v{version}: {e}") from None
    if pos != len(buf):
        raise ProtocolError(f"{len(buf) - pos} trailing bytes after {msg.name} v{version}", pos)
    return obj


def encode_body(obj: Message, version: int) -> bytes:
    """Encode just a message body (no header, no size) of ``obj`` at ``version``."""
    msg = type(obj)._message
    _check_version(msg, version)
    out = wire.Out()
    get_encoder(msg, version)(obj, out)
    if out.regions:
        raise ValueError("encode_body does not take region records")
    return b"".join(out)
