"""Version-independent message classes, generated from the schema specs.

One class per message and per nested struct type.  Every class carries every
field of every version (as a slot); what a given version puts on the wire is the
codec's business (codegen.py), so handlers never look at versions to read fields.
"""
from __future__ import annotations

from typing import Any, ClassVar

from samsa.protocol.messages.schema import ZERO_UUID, FieldSpec, MessageSpec, StructSpec

_MISSING = object()


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
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v
        return {a: conv(getattr(self, a)) for a in self._attrs}


def default_literal(field: FieldSpec, ns: dict[Any, Any]) -> str:
    """Python source for a field's default value (fresh object for mutables)."""
    d = field.default
    if field.kind == "array":
        return "None" if d is None else "[]"
    if field.kind == "struct":
        assert field.struct is not None
        return "None" if d is None else f"{ns_name(ns, field.struct.cls)}()"
    if field.kind == "uuid":
        return ns_name(ns, ZERO_UUID) if d is not None else "None"
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


def _make_init(cls: type[Message], struct: StructSpec) -> None:
    ns: dict[Any, Any] = {"_MISSING": _MISSING}
    params, body = [], []
    for f in struct.fields:
        mutable = (f.kind == "array" and f.default is not None) or \
                  (f.kind == "struct" and f.default is not None)
        if mutable:
            params.append(f"{f.attr}=_MISSING")
            body.append(f"    self.{f.attr} = {default_literal(f, ns)} "
                        f"if {f.attr} is _MISSING else {f.attr}")
        else:
            params.append(f"{f.attr}={default_literal(f, ns)}")
            body.append(f"    self.{f.attr} = {f.attr}")
    sig = ", ".join(["self"] + (["*"] + params if params else []))
    src = f"def __init__({sig}):\n" + ("\n".join(body) if body else "    pass") + "\n"
    exec(compile(src, f"<samsa init {struct.name}>", "exec"), ns)
    cls.__init__ = ns["__init__"]  # type: ignore[method-assign]  # compiled for its fields


def build_classes(msg: MessageSpec) -> type[Message]:
    """Create the top-level class and one class per nested struct; nested classes
    become attributes of the top-level class under their schema struct names."""
    top_name = msg.name
    made: dict[str, tuple[type[Message], StructSpec]] = {}

    def make(struct: StructSpec, qual: str) -> type[Message]:
        if struct.cls is not None:
            known: type[Message] = struct.cls
            return known
        attrs = tuple(f.attr for f in struct.fields)
        cls = type(struct.name, (Message,), {"__slots__": attrs, "_attrs": attrs,
                                              "_spec": struct, "__module__": "samsa.protocol.messages"})
        cls.__qualname__ = qual
        struct.cls = cls
        made[struct.name] = (cls, struct)
        for f in struct.fields:
            if f.struct is not None:
                make(f.struct, f"{top_name}.{f.struct.name}")
        return cls

    top = make(msg.root, top_name)
    for name, (cls, _) in made.items():
        if cls is not top:
            setattr(top, name, cls)
    # __init__ last: defaults of struct fields refer to the nested classes.
    for cls, struct in made.values():
        _make_init(cls, struct)
    top._message = msg
    return top
