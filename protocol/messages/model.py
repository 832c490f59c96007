"""Version-independent message classes, generated from the schema specs.

One class per message and per nested struct type, written as Python source by
classgen.py into generated.py (so import compiles nothing).  Every class carries every
field of every version (as a slot); what a given version puts on the wire is the
codec's business (codegen.py), so handlers never look at versions to read fields.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar

from samsa.protocol.messages.schema import ZERO_UUID, FieldSpec, MessageSpec, StructSpec

# The default of a list or struct parameter: each call gets a fresh [] or struct.
MISSING: Any = object()


class Message:
    """Base of all generated classes: keyword-only constructor, __eq__, __repr__.
    A checker sees each class's fields in protocol/messages/__init__.pyi (stubgen.py)."""

    __slots__ = ()
    _spec: ClassVar[StructSpec | None] = None
    _attrs: ClassVar[tuple[str, ...]] = ()
    _message: ClassVar[MessageSpec]  # set on each top-level message class

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        for a in self._attrs:
            if getattr(self, a) != getattr(other, a):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable, like a list

    def __repr__(self) -> str:
        inner = ", ".join(f"{a}={getattr(self, a)!r}" for a in self._attrs)
        return f"{type(self).__qualname__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dicts/lists (handy in tests and logs)."""
        def conv(v: Any) -> Any:
            if isinstance(v, Preencoded):
                v = v._pre_value
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v
        return {a: conv(getattr(self, a)) for a in self._attrs}


class Preencoded:
    """An element of a struct array encoded ahead of time (api.preencode): the encoder of
    ``version`` writes ``data`` for it instead of encoding ``value`` again; any other
    version encodes ``value``. A Metadata topic's entry is the same bytes for every
    request between two metadata changes, and encoding 100,000 partitions per request
    is what made the answer slow.

    Everything else sees ``value``: attribute reads, ==, repr and to_dict go to it,
    so a handler's caller (a test) reads the response as if it held the plain object.
    The slots are _pre_-prefixed: no generated field name starts with an underscore."""

    __slots__ = ("_pre_value", "_pre_version", "_pre_spec", "_pre_data")

    def __init__(self, value: Message, version: int, spec: StructSpec, data: bytes) -> None:
        self._pre_value = value
        self._pre_version = version
        self._pre_spec = spec
        self._pre_data = data

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_pre_"):
            # a slot not set yet (copy and pickle build the object bare): asking the
            # value for it would come back here without end
            raise AttributeError(name)
        return getattr(self._pre_value, name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Preencoded):
            other = other._pre_value
        return self._pre_value == other

    __hash__ = None  # type: ignore[assignment]  # as Message: unhashable

    def __repr__(self) -> str:
        return repr(self._pre_value)


def default_literal(field: FieldSpec, name_of: Callable[[object], str]) -> str:
    """Python source for a field's default value (a fresh object for mutables).
    ``name_of`` names, in the code being written, the zero UUID and the StructSpec of a
    struct field (whose class the expression calls)."""
    d = field.default
    if field.kind == "array":
        return "None" if d is None else "[]"
    if field.kind == "struct":
        return "None" if d is None else f"{name_of(field.struct_spec())}()"
    if field.kind == "uuid":
        return name_of(ZERO_UUID) if d is not None else "None"
    return repr(d)


def ns_name(ns: dict[Any, Any], obj: object) -> str:
    """Register ``obj`` in a generated-code namespace and return its name there."""
    key = ("obj", id(obj))
    name: str | None = ns.get(key)
    if name is None:
        name = f"_k{len(ns)}"
        ns[name] = obj
        ns[key] = name
    return name


def link(top: type[Message], msg: MessageSpec) -> None:
    """Tie a generated class (generated.py) and its nested classes to their specs: the
    codecs find a struct's class through ``StructSpec.cls``, and encoders find the spec
    through ``_message``."""
    pairs = [(top, msg.root)] + [(getattr(top, name), st) for name, st in msg.structs.items()]
    for cls, st in pairs:
        if cls._attrs != tuple(f.attr for f in st.fields):
            raise ImportError(f"generated class {cls.__qualname__} does not match its spec")
        st.cls = cls
        cls._spec = st
        # where users find them (the package re-exports every class), as repr and pickle say
        cls.__module__ = "samsa.protocol.messages"
    top._message = msg
