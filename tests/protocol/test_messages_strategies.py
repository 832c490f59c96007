"""Hypothesis strategies for message objects, derived from the same schema specs.

(Named test_messages_* so it sits with the tests it serves; it holds no tests.)
For a given version only the fields that version carries get random values;
the rest keep their defaults, so encode -> decode must give an equal object.
"""
from __future__ import annotations

from hypothesis import strategies as st

from samsa.protocol.messages.schema import FieldSpec, StructSpec

_INTS = {
    "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "uint16": (0, 2**16 - 1),
    "int32": (-2**31, 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-2**63, 2**63 - 1),
}

_cache: dict = {}


def _base(f: FieldSpec, kind: str, v: int):
    if kind in _INTS:
        lo, hi = _INTS[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "uuid":
        return st.uuids()
    if kind == "string":
        return st.text(max_size=12)
    if kind == "bytes":
        return st.binary(max_size=24)
    if kind == "records":
        return st.binary(max_size=64)
    raise AssertionError(kind)


def field_strategy(f: FieldSpec, v: int):
    if f.kind == "array":
        if f.elem == "struct":
            elem = struct_strategy(f.struct, v)
        else:
            elem = _base(f, f.elem, v)
        s = st.lists(elem, max_size=3)
    elif f.kind == "struct":
        s = struct_strategy(f.struct, v)
    else:
        s = _base(f, f.kind, v)
    if f.is_nullable(v) or (f.kind == "records"):
        s = st.one_of(st.none(), s)
    return s


def struct_strategy(spec: StructSpec, v: int):
    key = (id(spec), v)
    s = _cache.get(key)
    if s is None:
        kw = {f.attr: field_strategy(f, v) for f in spec.fields if f.present(v)}
        s = _cache[key] = st.builds(spec.cls, **kw)
    return s


def message_strategy(cls, v: int):
    return struct_strategy(cls._message.root, v)
