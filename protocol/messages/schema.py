"""Read Apache Kafka's JSON message schemas (as shipped by kafka-python) into field specs.

The JSON files are the one declarative description per API; everything else
(classes, decoders, encoders) is derived from the specs built here.  Reading is
pure: importlib.resources hands us the text, no file is opened by us.

Reading the JSON (and importing kafka-python to do it) costs a few hundred
milliseconds, so it happens when the classes are generated (classgen.py), not at
import: generated.py carries each spec as rows (``spec_rows``), which
``message_from_rows`` turns back into the same specs in a few milliseconds.
"""
from __future__ import annotations

import copy
import importlib.resources
import keyword
import re
import uuid
import warnings
from typing import Any

from samsa.protocol.messages import overlay

MAX_VERSION = 0x7FFF

FIXED_TYPES = {
    # type -> (struct format char, size)
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}
VAR_TYPES = {"string", "bytes", "records"}
ZERO_UUID = uuid.UUID(int=0)


def parse_versions(text: str | None) -> tuple[int, int] | None:
    """'3+' -> (3, MAX); '0-7' -> (0, 7); '5' -> (5, 5); 'none'/None -> None."""
    if text is None:
        return None
    text = str(text).strip()
    if text == "none":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


def in_range(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def snake_case(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()
    if keyword.iskeyword(s):
        s += "_"
    return s


class FieldSpec:
    """One schema field.  ``kind`` is a primitive type name, 'struct' or 'array'."""

    __slots__ = ("name", "attr", "kind", "elem", "struct", "versions", "nullable",
                 "tagged", "tag", "default", "ignorable", "raw_default")
    name: str
    attr: str
    kind: str
    elem: str | None
    struct: StructSpec | None
    versions: tuple[int, int] | None
    nullable: tuple[int, int] | None
    tagged: tuple[int, int] | None
    tag: int | None
    default: Any
    ignorable: bool
    raw_default: Any

    def __init__(self) -> None:
        self.elem = None        # for arrays: element type name ('int32', 'string', 'struct')
        self.struct = None      # StructSpec for struct / array-of-struct
        self.tag = None
        self.tagged = None
        self.nullable = None

    def struct_spec(self) -> StructSpec:
        """The struct of a struct or array-of-struct field."""
        assert self.struct is not None, self.name
        return self.struct

    def present(self, v: int) -> bool:
        return in_range(self.versions, v)

    def is_tagged(self, v: int) -> bool:
        return in_range(self.tagged, v)

    def is_nullable(self, v: int) -> bool:
        return in_range(self.nullable, v)

    def __repr__(self) -> str:
        return f"FieldSpec({self.name}:{self.kind}{'/' + self.elem if self.elem else ''})"


class StructSpec:
    __slots__ = ("name", "fields", "cls")

    def __init__(self, name: str, fields: list[FieldSpec]) -> None:
        self.name = name
        self.fields = fields
        # the generated message class (protocol.messages.model.build_classes)
        self.cls: Any = None


class MessageSpec:
    __slots__ = ("name", "api_key", "type", "valid", "flexible", "root", "structs", "api_name")
    name: str
    api_key: int
    type: str
    valid: tuple[int, int]
    flexible: tuple[int, int] | None
    root: StructSpec
    structs: dict[str, StructSpec]
    api_name: str

    def is_flexible(self, v: int) -> bool:
        return in_range(self.flexible, v)


def _default_value(f: dict[str, Any], kind: str, elem: str | None) -> Any:
    """The Python default of a field: explicit "default" wins ("null" means None);
    a nullable string/bytes/array/struct without one is None; otherwise
    0 / False / "" / b"" / [] / zero UUID, and None for records."""
    d = f.get("default")
    if d is not None and isinstance(d, str) and d == "null":
        return None
    if d is None and f.get("nullableVersions") and kind in ("string", "bytes", "array", "struct"):
        # contracts.md: nullable fields without an explicit default start as None
        # (e.g. error messages stay null, so clients use the error code's text).
        return None
    if kind == "array":
        return []
    if kind == "struct":
        return "struct"  # marker: a fresh default instance of the struct
    if kind in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        if d is None or d == "":
            return 0
        return int(d, 0) if isinstance(d, str) else int(d)
    if kind == "bool":
        return d in (True, "true")
    if kind == "float64":
        return float(d) if d not in (None, "") else 0.0
    if kind == "string":
        return "" if d is None else str(d)
    if kind == "bytes":
        return b""
    if kind == "records":
        return None
    if kind == "uuid":
        return ZERO_UUID
    raise ValueError(f"unknown type {kind}")


def _build_fields(fields_json: list[dict[str, Any]], structs: dict[str, StructSpec],
                 msg_name: str) -> list[FieldSpec]:
    out = []
    for f in fields_json:
        spec = FieldSpec()
        spec.name = f["name"]
        spec.attr = snake_case(f["name"])
        t = f["type"]
        if t.startswith("[]"):
            spec.kind = "array"
            inner = t[2:]
            spec.elem = "struct" if inner[0].isupper() else inner
            if spec.elem == "struct":
                spec.struct = _struct(inner, f, structs, msg_name)
        elif t[0].isupper():
            spec.kind = "struct"
            spec.struct = _struct(t, f, structs, msg_name)
        else:
            spec.kind = t
        if spec.kind not in ("array", "struct") and spec.kind not in FIXED_TYPES \
                and spec.kind not in VAR_TYPES:
            raise ValueError(f"{msg_name}.{spec.name}: unknown type {t}")
        spec.versions = parse_versions(f.get("versions"))
        spec.nullable = parse_versions(f.get("nullableVersions"))
        spec.tagged = parse_versions(f.get("taggedVersions"))
        spec.tag = f.get("tag")
        spec.ignorable = bool(f.get("ignorable", False))
        spec.raw_default = f.get("default")
        spec.default = _default_value(f, spec.kind, spec.elem)
        out.append(spec)
    attrs = [s.attr for s in out]
    if len(set(attrs)) != len(attrs):
        raise ValueError(f"{msg_name}: duplicate attribute names {attrs}")
    return out


def _struct(type_name: str, f: dict[str, Any], structs: dict[str, StructSpec],
            msg_name: str) -> StructSpec:
    if "fields" not in f:
        raise ValueError(f"{msg_name}: struct {type_name} without fields")
    existing = structs.get(type_name)
    fields = _build_fields(f["fields"], structs, msg_name)
    if existing is not None:
        # The same struct type may appear twice (common structs): must be identical.
        if [(x.name, x.kind, x.versions) for x in existing.fields] != \
                [(x.name, x.kind, x.versions) for x in fields]:
            raise ValueError(f"{msg_name}: conflicting definitions of struct {type_name}")
        return existing
    st = StructSpec(type_name, fields)
    structs[type_name] = st
    return st


def _apply_added_fields(data: dict[str, Any]) -> None:
    for path, field_json, before in overlay.ADD_FIELDS.get(data["name"], []):
        fields = data["fields"]
        for step in path:
            fields = next(x for x in fields if x["name"] == step)["fields"]
        idx = len(fields) if before is None else \
            next(i for i, x in enumerate(fields) if x["name"] == before)
        fields.insert(idx, copy.deepcopy(field_json))


def _schema_json(schema_name: str) -> dict[str, Any]:
    """Kafka's message schema: kafka-python's copy (Kafka 4.x), or ours for the
    ZooKeeper-era APIs Kafka 4 dropped (ControlledShutdown: brokers use it)."""
    with warnings.catch_warnings():
        # Importing kafka.protocol builds kafka-python's own classes through
        # importlib.resources.read_text, deprecated but harmless: keep test output clean.
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.schemas.load_json import load_json
    ours = importlib.resources.files("samsa.protocol.messages.schemas") / (schema_name + ".json")
    if ours.is_file():
        # kafka-python's reader: it resolves the schema's commonStructs too
        found: dict[str, Any] = load_json(schema_name, "samsa.protocol.messages.schemas")
        return found
    theirs: dict[str, Any] = load_json(schema_name)
    return theirs


def load_message(schema_name: str, api_name: str) -> MessageSpec:
    """Load e.g. 'ProduceRequest', widen it with the overlay, build its specs."""
    with warnings.catch_warnings():
        # kafka-python's loader uses importlib.resources.read_text (deprecated, harmless).
        warnings.simplefilter("ignore", DeprecationWarning)
        data = copy.deepcopy(_schema_json(schema_name))
    _apply_added_fields(data)
    m = MessageSpec()
    m.name = data["name"]
    m.api_name = api_name
    m.api_key = data["apiKey"]
    m.type = data["type"]
    valid = parse_versions(overlay.VALID_VERSIONS.get(api_name, data["validVersions"]))
    if valid is None:
        raise ValueError(f"{schema_name}: no valid version")
    m.valid = valid
    m.flexible = parse_versions(data.get("flexibleVersions"))
    m.structs = {}
    m.root = StructSpec(m.name, _build_fields(data["fields"], m.structs, m.name))
    return m


def load_served() -> list[tuple[str, MessageSpec, MessageSpec]]:
    """Every API samsa serves (overlay.SERVED) -> (api name, request spec, response spec),
    read from the JSON schemas and checked against the served version ranges."""
    served = []
    for api_name, (key, lo, hi) in overlay.SERVED.items():
        req = load_message(api_name + "Request", api_name)
        resp = load_message(api_name + "Response", api_name)
        if not serves(req, resp, key, lo, hi):
            raise ValueError(f"{api_name}: overlay.SERVED {(key, lo, hi)} is outside its schemas")
        served.append((api_name, req, resp))
    return served


def serves(req: MessageSpec, resp: MessageSpec, key: int, lo: int, hi: int) -> bool:
    """Whether the two specs describe API ``key`` at every version from lo to hi."""
    return (req.api_key == key == resp.api_key and req.valid[0] <= lo and hi <= req.valid[1]
            and resp.valid[0] <= lo and hi <= resp.valid[1])


# -- specs as rows: what generated.py stores, so that import does not read the JSON --
# A field: (name, attr, kind, elem, struct name, versions, nullable, tagged, tag, default,
# ignorable, raw default); a message: (name, api name, api key, type, valid, flexible,
# ((struct name, (field, ...)), ...) in the order of MessageSpec.structs, (root field, ...)).
FieldRow = tuple[str, str, str, str | None, str | None, tuple[int, int] | None,
                 tuple[int, int] | None, tuple[int, int] | None, int | None, Any, bool, Any]
MessageRow = tuple[str, str, int, str, tuple[int, int], tuple[int, int] | None,
                   tuple[tuple[str, tuple[FieldRow, ...]], ...], tuple[FieldRow, ...]]


def _field_row(f: FieldSpec) -> FieldRow:
    return (f.name, f.attr, f.kind, f.elem, None if f.struct is None else f.struct.name,
            f.versions, f.nullable, f.tagged, f.tag, f.default, f.ignorable, f.raw_default)


def spec_rows(m: MessageSpec) -> MessageRow:
    return (m.name, m.api_name, m.api_key, m.type, m.valid, m.flexible,
            tuple((name, tuple(map(_field_row, st.fields))) for name, st in m.structs.items()),
            tuple(map(_field_row, m.root.fields)))


def message_from_rows(row: MessageRow) -> MessageSpec:
    """The MessageSpec that ``spec_rows`` turned into ``row``."""
    name, api_name, api_key, type_, valid, flexible, struct_rows, root_fields = row
    m = MessageSpec()
    m.name, m.api_name, m.api_key, m.type, m.valid, m.flexible = \
        name, api_name, api_key, type_, valid, flexible
    # Structs first, empty: a field names its struct, which may come later in the order.
    m.structs = {sname: StructSpec(sname, []) for sname, _ in struct_rows}

    def fields(rows: tuple[FieldRow, ...]) -> list[FieldSpec]:
        out = []
        for (fname, attr, kind, elem, sname, versions, nullable, tagged, tag, default,
             ignorable, raw_default) in rows:
            f = FieldSpec()
            f.name, f.attr, f.kind, f.elem = fname, attr, kind, elem
            f.struct = None if sname is None else m.structs[sname]
            f.versions, f.nullable, f.tagged, f.tag = versions, nullable, tagged, tag
            f.default, f.ignorable, f.raw_default = default, ignorable, raw_default
            out.append(f)
        return out

    for sname, rows in struct_rows:
        m.structs[sname].fields = fields(rows)
    m.root = StructSpec(name, fields(root_fields))
    return m
