"""Generate and compile a decoder and an encoder per (message, version).

Why generate: interpreting the schema on every call costs a dictionary walk per
field; generated straight-line code (fixed-width neighbours fused into one
struct call, one function per struct type) keeps Produce/Fetch in the tens of
microseconds.  Each (message, version, direction) is compiled on first use and
cached.

Decoders: ``d(buf, pos) -> (obj, pos)`` over a memoryview of unsigned bytes.
They rely on wire.py readers for every variable-length item, which check lengths
against the remaining buffer.  Fixed-width reads past the end raise struct.error /
IndexError, which the public entry points turn into ProtocolError.

Encoders: ``e(obj, out)`` append parts to a wire.Out list.  Fields the target
version does not have are simply not written (ignorable or not: the broker must
never fail an encode because a handler filled a newer field). An element of a
struct array named in PREENCODABLE may be a model.Preencoded (api.preencode):
encoded ahead of time for one version, it is appended as its bytes by that version's
encoder.
"""
from __future__ import annotations

import struct
import threading
from typing import Any, Callable, TypeAlias

from samsa.protocol.errors import ProtocolError
from samsa.protocol.messages import wire
from samsa.protocol.messages.model import Preencoded, default_literal, ns_name
from samsa.protocol.messages.schema import FIXED_TYPES, ZERO_UUID, FieldSpec, MessageSpec, StructSpec

# (message, struct) whose array elements may be model.Preencoded (api.preencode refuses
# others): only these arrays' encoders check each element's class, so Produce and Fetch
# pay nothing for the feature. Metadata's topics and their partitions: the same bytes
# between two changes (of the topic; of the partition, while its topic's others change).
PREENCODABLE: frozenset[tuple[str, str]] = frozenset({
    ("MetadataResponse", "MetadataResponseTopic"),
    ("MetadataResponse", "MetadataResponsePartition")})

_cache: dict[tuple[str, int, str], Codec] = {}
_lock = threading.Lock()
# A compiled decoder (buf, pos) -> (message, pos) or encoder (message, out) -> None.
Codec: TypeAlias = Callable[..., Any]


def _min_size(struct_spec: StructSpec, v: int, flex: bool) -> int:
    n = 1 if flex else 0  # tag buffer
    for f in struct_spec.fields:
        if not f.present(v) or (flex and f.is_tagged(v)):
            continue
        n += _field_min(f, v, flex)
    return n


def _field_min(f: FieldSpec, v: int, flex: bool) -> int:
    k = f.kind
    if k in FIXED_TYPES:
        return FIXED_TYPES[k][1]
    if k == "string":
        return 1 if flex else 2
    if k in ("bytes", "records", "array"):
        return 1 if flex else 4
    if k == "struct":
        return 1 if f.is_nullable(v) else _min_size(f.struct_spec(), v, flex)
    raise AssertionError(k)


def _elem_min(f: FieldSpec, v: int, flex: bool) -> int:
    e = f.elem
    if e == "struct":
        return max(1, _min_size(f.struct_spec(), v, flex))
    if e in FIXED_TYPES:
        return FIXED_TYPES[e][1]
    return 1 if flex else 2  # strings (bytes arrays do not occur)


class _Gen:
    """Source builder for one (message, version): all struct functions in one namespace."""

    def __init__(self, msg: MessageSpec, v: int):
        self.msg = msg
        self.v = v
        self.flex = msg.is_flexible(v)
        self.ns: dict[Any, Any] = {name: getattr(wire, name) for name in dir(wire) if not name.startswith("__")}
        self.ns.update({"_new": object.__new__, "_ZU": ZERO_UUID, "_UUID": __import__("uuid").UUID,
                        "_unpack_from": struct.unpack_from, "_pack": struct.pack,
                        "_ProtocolError": ProtocolError, "_Pre": Preencoded})
        self.lines: list[str] = []
        self.done: dict[tuple[str, str], bool] = {}

    # -- helpers --
    def name(self, obj: object) -> str:
        return ns_name(self.ns, obj)

    def default_name(self, obj: object) -> str:
        """default_literal's names: a struct's class, or the zero UUID."""
        return self.name(obj.cls if isinstance(obj, StructSpec) else obj)

    def fixed_struct(self, fmt: str) -> str:
        key = ("fmt", fmt)
        if key not in self.ns:
            s = struct.Struct(">" + fmt)
            self.ns[key] = self.name(s)
        found: str = self.ns[key]
        return found

    def seq_fields(self, st: StructSpec) -> list[FieldSpec]:
        return [f for f in st.fields if f.present(self.v) and not (self.flex and f.is_tagged(self.v))]

    def tagged_fields(self, st: StructSpec) -> list[FieldSpec]:
        if not self.flex:
            return []
        return sorted((f for f in st.fields if f.present(self.v) and f.is_tagged(self.v)),
                      key=lambda f: -1 if f.tag is None else f.tag)

    # ================= decoding =================
    def decoder(self, st: StructSpec) -> str:
        fname = f"d_{st.name}"
        if ("d", st.name) in self.done:
            return fname
        self.done[("d", st.name)] = True
        flex = self.flex
        L = [f"def {fname}(buf, pos):", f"    o = _new({self.name(st.cls)})"]
        seq = self.seq_fields(st)
        tagged = self.tagged_fields(st)
        for f in st.fields:
            if f not in seq:
                L.append(f"    o.{f.attr} = {default_literal(f, self.default_name)}")
        i = 0
        while i < len(seq):
            f = seq[i]
            if f.kind in FIXED_TYPES:
                group = []
                while i < len(seq) and seq[i].kind in FIXED_TYPES:
                    group.append(seq[i])
                    i += 1
                self._dec_fixed_group(group, L, "    ")
                continue
            self._dec_field(f, L, "    ", f"o.{f.attr}")
            i += 1
        if flex:
            L.append("    nt = buf[pos]")
            L.append("    if nt < 0x80:")
            L.append("        pos += 1")
            L.append("    else:")
            L.append("        nt, pos = read_uvarint(buf, pos)")
            if not tagged:
                L.append("    if nt:")
                L.append("        pos = skip_tags(buf, pos, nt)")
            else:
                L.append("    if nt:")
                L.append("        if nt * 2 > len(buf) - pos:")
                L.append("            fail('too many tagged fields', pos)")
                L.append("        for _ in range(nt):")
                L.append("            tg, pos = read_uvarint(buf, pos)")
                L.append("            sz, pos = read_uvarint(buf, pos)")
                L.append("            te = pos + sz")
                L.append("            if te > len(buf):")
                L.append("                fail('tagged field past end', pos)")
                kw = "if"
                for f in tagged:
                    L.append(f"            {kw} tg == {f.tag}:")
                    if f.kind in FIXED_TYPES:
                        self._dec_fixed_group([f], L, "                ")
                    else:
                        self._dec_field(f, L, "                ", f"o.{f.attr}")
                    L.append("                if pos != te:")
                    L.append("                    fail('tagged field size mismatch', pos)")
                    kw = "elif"
                L.append("            pos = te")
        L.append("    return o, pos")
        self.lines.extend(L)
        self.lines.append("")
        return fname

    def _dec_fixed_group(self, group: list[FieldSpec], L: list[str], ind: str) -> None:
        fmt = "".join(FIXED_TYPES[f.kind][0] for f in group)
        size = sum(FIXED_TYPES[f.kind][1] for f in group)
        s = self.fixed_struct(fmt)
        targets = []
        post = []
        for j, f in enumerate(group):
            if f.kind == "uuid":
                targets.append(f"_u{j}")
                post.append(f"o.{f.attr} = _UUID(bytes=_u{j})")
            else:
                targets.append(f"o.{f.attr}")
        L.append(f"{ind}{', '.join(targets)}, = {s}.unpack_from(buf, pos)")
        L.append(f"{ind}pos += {size}")
        for p in post:
            L.append(ind + p)

    def _dec_field(self, f: FieldSpec, L: list[str], ind: str, target: str) -> None:
        v, flex = self.v, self.flex
        c = "c" if flex else ""
        nullable = f.is_nullable(v)
        k = f.kind
        if k == "string":
            L.append(f"{ind}{target}, pos = read_{c}{'n' if nullable else ''}string(buf, pos)")
        elif k == "bytes":
            L.append(f"{ind}{target}, pos = read_{c}{'n' if nullable else ''}bytes(buf, pos)")
        elif k == "records":
            L.append(f"{ind}{target}, pos = read_{c}records(buf, pos)")
        elif k in FIXED_TYPES:
            raise AssertionError("fixed handled by group")
        elif k == "struct":
            fn = self.decoder(f.struct_spec())
            if nullable:
                L.append(f"{ind}if buf[pos] == 0xFF:")
                L.append(f"{ind}    {target} = None")
                L.append(f"{ind}    pos += 1")
                L.append(f"{ind}else:")
                L.append(f"{ind}    {target}, pos = {fn}(buf, pos + 1)")
            else:
                L.append(f"{ind}{target}, pos = {fn}(buf, pos)")
        elif k == "array":
            ms = _elem_min(f, v, flex)
            L.append(f"{ind}n, pos = read_{c}count(buf, pos, {ms}, {nullable})")
            L.append(f"{ind}if n < 0:")
            L.append(f"{ind}    {target} = None")
            L.append(f"{ind}else:")
            e = f.elem
            if e in FIXED_TYPES and e != "uuid":
                ch, sz = FIXED_TYPES[e]
                L.append(f"{ind}    {target} = list(_unpack_from('>%d{ch}' % n, buf, pos))")
                L.append(f"{ind}    pos += n * {sz}")
            else:
                L.append(f"{ind}    lst = []")
                L.append(f"{ind}    for _ in range(n):")
                if e == "struct":
                    fn = self.decoder(f.struct_spec())
                    L.append(f"{ind}        x, pos = {fn}(buf, pos)")
                elif e == "uuid":
                    L.append(f"{ind}        x = _UUID(bytes=bytes(buf[pos:pos + 16]))")
                    L.append(f"{ind}        pos += 16")
                elif e == "string":
                    L.append(f"{ind}        x, pos = read_{c}string(buf, pos)")
                else:
                    raise AssertionError(e)
                L.append(f"{ind}        lst.append(x)")
                L.append(f"{ind}    {target} = lst")
        else:
            raise AssertionError(k)

    # ================= encoding =================
    def encoder(self, st: StructSpec) -> str:
        fname = f"e_{st.name}"
        if ("e", st.name) in self.done:
            return fname
        self.done[("e", st.name)] = True
        L = [f"def {fname}(o, out):", "    app = out.append"]
        seq = self.seq_fields(st)
        i = 0
        while i < len(seq):
            f = seq[i]
            if f.kind in FIXED_TYPES:
                group = []
                while i < len(seq) and seq[i].kind in FIXED_TYPES:
                    group.append(seq[i])
                    i += 1
                self._enc_fixed_group(group, L, "    ", "app")
                continue
            self._enc_field(f, L, "    ", f"o.{f.attr}", "out", "app")
            i += 1
        if self.flex:
            tagged = self.tagged_fields(st)
            if not tagged:
                L.append("    app(b'\\x00')")
            else:
                L.append("    tags = []")
                for f in tagged:
                    L.append(f"    v = o.{f.attr}")
                    L.append(f"    if {self._nondefault(f, 'v')}:")
                    L.append("        sub = Out()")
                    if f.kind in FIXED_TYPES:
                        self._enc_fixed_group([f], L, "        ", "sub.append", src="v")
                    else:
                        self._enc_field(f, L, "        ", "v", "sub", "sub.append")
                    L.append(f"        tags.append(({f.tag}, b''.join(sub)))")
                L.append("    if not tags:")
                L.append("        app(b'\\x00')")
                L.append("    else:")
                L.append("        app(uvarint(len(tags)))")
                L.append("        for t, d in tags:")
                L.append("            app(uvarint(t))")
                L.append("            app(uvarint(len(d)))")
                L.append("            app(d)")
        self.lines.extend(L)
        self.lines.append("")
        return fname

    def _nondefault(self, f: FieldSpec, var: str) -> str:
        d = f.default
        if d is None:
            return f"{var} is not None"
        if f.kind == "array":
            return var
        if f.kind == "struct":
            parts = []
            for sf in f.struct_spec().fields:
                if sf.kind in ("array",):
                    parts.append(f"not {var}.{sf.attr}")
                elif sf.kind == "struct":
                    parts.append(f"{var}.{sf.attr} == {self.name(sf.struct_spec().cls)}()")
                else:
                    parts.append(f"{var}.{sf.attr} == {default_literal(sf, self.default_name)}")
            return f"{var} is not None and not ({' and '.join(parts) or 'True'})"
        return f"{var} != {default_literal(f, self.default_name)}"

    def _enc_fixed_group(self, group: list[FieldSpec], L: list[str], ind: str, app: str,
                         src: str | None = None) -> None:
        fmt = "".join(FIXED_TYPES[f.kind][0] for f in group)
        s = self.fixed_struct(fmt)
        args = []
        for f in group:
            expr = src if src is not None else f"o.{f.attr}"
            if f.kind == "uuid":
                expr = f"({expr} or _ZU).bytes"
            args.append(expr)
        L.append(f"{ind}{app}({s}.pack({', '.join(args)}))")

    def _enc_field(self, f: FieldSpec, L: list[str], ind: str, src: str, out: str, app: str) -> None:
        v, flex = self.v, self.flex
        c = "c" if flex else ""
        nullable = f.is_nullable(v)
        k = f.kind
        if k == "string":
            L.append(f"{ind}write_{c}{'n' if nullable else ''}string({src}, {out})")
        elif k == "bytes":
            L.append(f"{ind}write_{c}{'n' if nullable else ''}bytes({src}, {out})")
        elif k == "records":
            L.append(f"{ind}write_{c}records({src}, {out})")
        elif k == "struct":
            fn = self.encoder(f.struct_spec())
            cls = self.name(f.struct_spec().cls)
            L.append(f"{ind}sv = {src}")
            if nullable:
                L.append(f"{ind}if sv is None:")
                L.append(f"{ind}    {app}(b'\\xff')")
                L.append(f"{ind}else:")
                L.append(f"{ind}    {app}(b'\\x01')")
                L.append(f"{ind}    {fn}(sv, {out})")
            else:
                L.append(f"{ind}{fn}(sv if sv is not None else {cls}(), {out})")
        elif k == "array":
            L.append(f"{ind}av = {src}")
            L.append(f"{ind}if av is None:")
            if nullable:
                L.append(f"{ind}    {app}({'UV1[0]' if flex else 'NULL_I32'})")
            else:
                L.append(f"{ind}    {app}({'UV1[1]' if flex else 'I32(0)'})")
            L.append(f"{ind}else:")
            if flex:
                L.append(f"{ind}    n = len(av) + 1")
                L.append(f"{ind}    {app}(UV1[n] if n < 128 else uvarint(n))")
            else:
                L.append(f"{ind}    {app}(I32(len(av)))")
            e = f.elem
            if e in FIXED_TYPES and e != "uuid":
                ch = FIXED_TYPES[e][0]
                L.append(f"{ind}    {app}(_pack('>%d{ch}' % len(av), *av))")
            else:
                L.append(f"{ind}    for x in av:")
                if e == "struct":
                    fn = self.encoder(f.struct_spec())
                    # an element encoded ahead of time for this version and struct is
                    # written as it is (model.Preencoded); for another, its value is encoded
                    if (self.msg.name, f.struct_spec().name) in PREENCODABLE:
                        spec = self.name(f.struct_spec())
                        L.append(f"{ind}        if x.__class__ is _Pre:")
                        L.append(f"{ind}            if x._pre_version == {self.v} and x._pre_spec is {spec}:")
                        L.append(f"{ind}                {app}(x._pre_data)")
                        L.append(f"{ind}                continue")
                        L.append(f"{ind}            x = x._pre_value")
                    L.append(f"{ind}        {fn}(x, {out})")
                elif e == "uuid":
                    L.append(f"{ind}        {app}((x or _ZU).bytes)")
                elif e == "string":
                    L.append(f"{ind}        write_{c}string(x, {out})")
                else:
                    raise AssertionError(e)
        else:
            raise AssertionError(k)

    def compile(self, entry: str) -> Codec:
        src = "\n".join(self.lines) + "\n"
        code = compile(src, f"<samsa {self.msg.name} v{self.v}>", "exec")
        exec(code, self.ns)
        fn: Codec = self.ns[entry]
        fn.__source__ = src  # type: ignore[attr-defined]  # kept for debugging
        return fn


def _compiled(msg: MessageSpec, v: int, kind: str) -> Codec:
    """The codec function for one message, version and direction ("d" or "e"),
    generated and compiled on first use, then cached (thread-safe)."""
    def build(g: _Gen) -> Codec:
        return g.compile(g.decoder(msg.root) if kind == "d" else g.encoder(msg.root))
    return _cached(msg, v, kind, build)


def get_struct_encoder(msg: MessageSpec, st: StructSpec, v: int) -> Codec:
    """The encoder of one of ``msg``'s nested structs at version ``v`` (for
    api.preencode), compiled on first use and cached like the message's own."""
    return _cached(msg, v, "e:" + st.name, lambda g: g.compile(g.encoder(st)))


def _cached(msg: MessageSpec, v: int, kind: str, build: Callable[[_Gen], Codec]) -> Codec:
    key = (msg.name, v, kind)
    fn = _cache.get(key)
    if fn is None:
        with _lock:
            fn = _cache.get(key)
            if fn is None:
                fn = _cache[key] = build(_Gen(msg, v))
    return fn


def get_decoder(msg: MessageSpec, v: int) -> Codec:
    return _compiled(msg, v, "d")


def get_encoder(msg: MessageSpec, v: int) -> Codec:
    return _compiled(msg, v, "e")
