"""java.util.Properties parsing rules, case by case."""
import pytest

from samsa.config import ConfigError, load_properties, parse_properties


@pytest.mark.parametrize("text, expected", [
    ("a=1", {"a": "1"}),
    ("a:1", {"a": "1"}),
    ("a 1", {"a": "1"}),
    ("a\t=\t1", {"a": "1"}),
    ("  a = 1", {"a": "1"}),
    ("a = 1  ", {"a": "1  "}),            # Java keeps trailing whitespace of values
    ("a", {"a": ""}),
    ("a=", {"a": ""}),
    ("a==1", {"a": "=1"}),                 # only one separator is consumed
    ("a = :1", {"a": ":1"}),
    ("a  b c", {"a": "b c"}),
    ("# c\n! c\n  # indented\na=1", {"a": "1"}),
    ("\n\n   \n\ta=1\n", {"a": "1"}),
    ("a=1\na=2", {"a": "2"}),              # last wins
    ("a=x#y", {"a": "x#y"}),               # no trailing comments in Java
    ("a\\=b=c", {"a=b": "c"}),
    ("a\\:b:c", {"a:b": "c"}),
    ("a\\ b=c", {"a b": "c"}),
    ("a=\\t\\n\\r\\f", {"a": "\t\n\r\f"}),
    ("a=\\u0041\\u00e9", {"a": "A\u00e9"}),
    ("a=\\q\\\\", {"a": "q\\"}),           # unknown escape: the char itself
    ("a=1,\\\n    2,\\\n\t3", {"a": "1,2,3"}),   # continuation strips leading whitespace
    ("a=x\\\n# not a comment", {"a": "x# not a comment"}),
    ("a=x\\\\\nb=y", {"a": "x\\", "b": "y"}),    # even backslashes: no continuation
    ("# comment \\\na=1", {"a": "1"}),          # comments never continue
    ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
    ("a=x\\", {"a": "x"}),                 # dangling backslash at EOF dropped
    ("k\\\n  ey=v", {"key": "v"}),
])
def test_parse(text, expected):
    assert parse_properties(text) == expected


def test_bad_unicode_escape_names_line_and_key():
    with pytest.raises(ConfigError) as ei:
        parse_properties("\n\nlog.dirs=\\u12G4")
    msg = str(ei.value)
    assert "log.dirs" in msg and "line 3" in msg and "\\u12G4" in msg and "4 hex digits" in msg


def test_load_file_utf8_latin1_bom(tmp_path):
    p = tmp_path / "a.properties"
    p.write_bytes("\ufeffx=caf\u00e9\n".encode("utf-8"))
    assert load_properties(p) == {"x": "caf\u00e9"}
    p.write_bytes("x=caf\u00e9\n".encode("iso-8859-1"))
    assert load_properties(p) == {"x": "caf\u00e9"}


def test_unicode_escape_surrogate_pair():
    assert parse_properties("a=\\ud83d\\ude00") == {"a": "\U0001F600"}


from hypothesis import given, settings, strategies as st  # noqa: E402

from samsa.config import format_properties  # noqa: E402

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_text.filter(bool), _text, max_size=6))
def test_format_parse_round_trip(props):
    assert parse_properties(format_properties(props)) == props
