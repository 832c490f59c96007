"""The committed stub (protocol/messages/__init__.pyi) is what stubgen renders from the
schemas: a schema, overlay or codec change that alters a message's fields must show in
what the type checker sees, or the checker would pass code that fails on the wire.
Likewise the committed classes and specs (protocol/messages/generated.py, classgen)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import samsa.protocol.messages
from samsa.protocol.messages import classgen, schema, stubgen


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


def test_the_committed_classes_are_what_the_schemas_render():
    # generated.py is what import runs instead of reading the JSON schemas: a schema or
    # overlay change must reach it, or the wire would follow the old schema.
    committed = classgen.GENERATED_PATH.read_text(encoding="utf-8")
    assert committed == classgen.render(), (
        f"{classgen.GENERATED_PATH} is out of date: regenerate it with `{classgen.REGENERATE}`")


def test_the_specs_import_builds_are_the_ones_the_schemas_give():
    # The rows in generated.py give back specs equal, field by field, to the JSON's.
    for _, req, resp in schema.load_served():
        for spec in (req, resp):
            linked = samsa.protocol.messages.MESSAGE_CLASSES[spec.name]._message
            assert schema.spec_rows(linked) == schema.spec_rows(spec), spec.name


@pytest.mark.integration  # a fresh interpreter: this one has read the schemas above
def test_importing_the_messages_leaves_kafka_python_out():
    code = ("import sys, samsa.protocol.messages as m; m.ProduceRequest; "
            "print(sorted(n for n in sys.modules if n == 'kafka' or n.startswith('kafka.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]", "importing the messages imported kafka-python"


@pytest.mark.integration  # a fresh interpreter, whose overlay serves a version the file lacks
def test_a_served_range_generated_py_does_not_describe_fails_the_import():
    # overlay.SERVED widened without generating again: the broker would advertise a
    # version its specs cannot encode; the import says so instead.
    code = ("import samsa.protocol.messages.overlay as o; k, lo, hi = o.SERVED['Produce']; "
            "o.SERVED['Produce'] = (k, lo, hi + 1); import samsa.protocol.messages.api")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.returncode != 0
    assert "outside generated.py's specs" in out.stderr and "classgen" in out.stderr
