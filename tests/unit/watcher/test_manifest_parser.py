import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from services.watcher import manifest_parser
from services.watcher.manifest_parser import ManifestSyntaxError, parse_manifest


def test_several_documents_with_their_lines_and_empty_documents_skipped():
    text = b"a: 1\n---\n---\n# comment\nb: 2\n---\n"
    docs = parse_manifest("x.yaml", text)
    assert [(d.index, d.line, d.data) for d in docs] == [(1, 1, {"a": 1}), (2, 5, {"b": 2})]


def test_list_items_carry_their_lines():
    text = b"kind: List\napiVersion: v1\nitems:\n- kind: A\n  x: 1\n- kind: B\n"
    (doc,) = parse_manifest("x.yml", text)
    assert doc.item_lines == [4, 6]
    assert [item["kind"] for item in doc.data["items"]] == ["A", "B"]


def test_timestamps_stay_strings():
    (doc,) = parse_manifest("x.yaml", b"metadata:\n  creationTimestamp: 2024-01-31T12:00:00Z\n  d: 2024-01-31\n")
    assert doc.data["metadata"] == {"creationTimestamp": "2024-01-31T12:00:00Z", "d": "2024-01-31"}


def test_syntax_error_has_line_and_column():
    with pytest.raises(ManifestSyntaxError) as err:
        parse_manifest("x.yaml", b"a: 1\n---\nb:\n  - c\n d: [\n")
    assert err.value.line >= 5
    assert err.value.message


def test_a_key_given_twice_is_an_error_on_its_second_line():
    with pytest.raises(ManifestSyntaxError) as err:
        parse_manifest("x.yaml", b"spec:\n  rules: []\n  rules: [1]\n")
    assert err.value.line == 3
    assert "'rules' is given twice (first on line 2)" in err.value.message


def test_merge_keys_may_be_overridden():
    (doc,) = parse_manifest("x.yaml", b"base: &b {p: 1, q: 2}\nv:\n  <<: *b\n  p: 3\n")
    assert doc.data["v"] == {"p": 3, "q": 2}


def test_json_stream_and_its_errors():
    docs = parse_manifest("x.json", b'{"a": 1}\n\n{"b":\n 2}\n')
    assert [(d.line, d.data) for d in docs] == [(1, {"a": 1}), (3, {"b": 2})]
    with pytest.raises(ManifestSyntaxError) as err:
        parse_manifest("x.json", b'{"a": 1}\n{"b": ]\n')
    assert (err.value.line, err.value.column) == (2, 7)


def test_non_utf8_is_reported_with_its_line():
    with pytest.raises(ManifestSyntaxError) as err:
        parse_manifest("x.yaml", b"a: 1\nb: \xff\n")
    assert err.value.line == 2
    assert "UTF-8" in err.value.message


# --- the fast constructor builds what PyYAML's own does -------------------------------------------

def _outcome(parse, text: str) -> tuple[str, object]:
    """("ok", documents), or ("error", "") when the text is refused (each side words it its own way)."""
    try:
        return "ok", parse(text)
    except (yaml.YAMLError, ManifestSyntaxError):
        return "error", ""


def _ours(text: str) -> list:
    return [d.data for d in parse_manifest("x.yaml", text.encode())]


def _pyyaml_documents(text: str) -> list:
    """Every non-empty document as the loader's own constructor builds it (the reference)."""
    loader = manifest_parser._ManifestLoader(text)
    documents = []
    try:
        while loader.check_node():
            data = loader.construct_document(loader.get_node())
            if data is not None:
                documents.append(data)
        return documents
    finally:
        loader.dispose()


SCALARS = ["1", "0x1F", "0o17", "017", "1_000", "1:30", "-2", "+3", "1.5", "1e3", ".inf", "-.Inf", ".nan", "yes",
           "No", "on", "OFF", "true", "False", "~", "null", "", "2024-01-31", "2024-01-31T12:00:00Z", "'quoted'",
           '"dq"', "!!str 1", "!!int '7'", "!!float 1", "!!binary aGVsbG8=", "!!null ''", "a: b", "- x"]


@pytest.mark.parametrize("scalar", SCALARS)
def test_each_scalar_form_means_what_pyyaml_says(scalar):
    for text in (f"k: {scalar}\n", f"l: [{scalar}]\n", f"{scalar}: v\n"):
        assert _outcome(_ours, text) == _outcome(_pyyaml_documents, text), text


@pytest.mark.parametrize("text", [
    "base: &b {a: 1, b: 2}\nderived:\n  <<: *b\n  b: 3\n",  # a merge key: the full constructor
    "s: !!set {a, b}\no: !!omap [a: 1, b: 2]\np: !!pairs [a: 1, a: 2]\n",  # tagged collections
    "? [a, b]\n: 1\n",  # a collection as a key
    "a: &x [1, 2]\nb: *x\nc: *x\n",  # aliases
    "a: 1\n---\n- 1\n- {b: [c, {d: e}]}\n---\nplain\n",
])
def test_documents_pyyaml_builds_differently_are_built_by_pyyaml(text):
    assert _outcome(_ours, text) == _outcome(_pyyaml_documents, text)


def test_an_alias_inside_itself_is_built_as_pyyaml_builds_it():
    [data] = _ours("r: &r [1, *r]\n")
    assert data["r"][0] == 1 and data["r"][1] is data["r"]


def test_a_key_given_twice_is_named_with_both_lines_in_either_constructor():
    for text in (b"a: 1\nb: 2\na: 3\n", b"x: &y {c: 1}\nz:\n  <<: *y\n  a: 1\n  a: 2\n"):
        with pytest.raises(ManifestSyntaxError, match="given twice") as err:
            parse_manifest("x.yaml", text)
        assert err.value.line in (3, 5)


@settings(deadline=None, derandomize=True, database=None, max_examples=200)
@given(data=st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12),
              st.sampled_from(SCALARS)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20))
def test_any_document_means_what_pyyaml_says(data):
    text = yaml.safe_dump_all([data, {"next": data}])
    assert _outcome(_ours, text) == _outcome(_pyyaml_documents, text)
