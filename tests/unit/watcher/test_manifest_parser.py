import pytest

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
