"""The committed stub (protocol/messages/__init__.pyi) is what stubgen renders from the
schemas: a schema, overlay or codec change that alters a message's fields must show in
what the type checker sees, or the checker would pass code that fails on the wire."""
from __future__ import annotations

import ast

import samsa.protocol.messages
from samsa.protocol.messages import stubgen


def test_the_committed_stub_is_what_the_schemas_render():
    committed = stubgen.STUB_PATH.read_text(encoding="utf-8")
    assert committed == stubgen.render(), (
        f"{stubgen.STUB_PATH} is out of date: regenerate it with `{stubgen.REGENERATE}`")


def test_the_stub_names_every_public_name_and_each_field_of_each_class():
    tree = ast.parse(stubgen.STUB_PATH.read_text(encoding="utf-8"))
    defined: dict[str, ast.ClassDef] = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    imported = {a.asname for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert set(samsa.protocol.messages.__all__) <= set(defined) | imported
    for name, cls in samsa.protocol.messages.MESSAGE_CLASSES.items():
        node = defined[name]
        nested = {n.name: n for n in node.body if isinstance(n, ast.ClassDef)}
        for attr in dir(cls):
            inner = getattr(cls, attr)
            if isinstance(inner, type) and issubclass(inner, samsa.protocol.messages.Message) \
                    and inner is not cls:
                assert attr in nested, f"{name}.{attr}"
                fields = [t.target.id for t in nested[attr].body if isinstance(t, ast.AnnAssign)]
                assert tuple(fields) == inner._attrs, f"{name}.{attr}"
        fields = [t.target.id for t in node.body if isinstance(t, ast.AnnAssign)]
        assert tuple(fields) == cls._attrs, name


def test_a_field_is_typed_as_the_runtime_holds_it():
    # Spot checks of the mapping: a nullable string, a nullable array of structs,
    # records, a uuid, an int array, and the keyword-only constructor with defaults.
    text = stubgen.STUB_PATH.read_text(encoding="utf-8")
    for line in ("        error_message: str | None",
                 "    topics: list[MetadataRequest.MetadataRequestTopic] | None",
                 "        records: Records",
                 "        topic_id: UUID",
                 "        partitions: list[int]"):
        assert line in text.splitlines(), line
    r = samsa.protocol.messages.ProduceResponse.PartitionProduceResponse()
    assert r.error_message is None and r.record_errors == [] and r.index == 0
