"""yaml-rs's reading is used only where it is the exact reader's: every text either reads the same both ways
or is left to the exact reader (None)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.watcher.manifest_parser import parse_manifest
from services.watcher.manifests import read_objects
from services.watcher.yaml_fast import fast_documents

# Plain scalars the two YAML versions may read differently, and ordinary ones.
TOKENS = ["yes", "No", "ON", "off", "y", "n", "true", "False", "null", "~", "0755", "0o17", "0b101", "0x1F",
          "0x1_F", "1_000", "12:30", "190:20:30", "1e3", "1.5e3", "1.0e+3", "+.5", "-.5", ".5", "1.", ".inf",
          "-.Inf", "10.0.0.1", "2024-01-01", "2024-01-01T10:00:00Z", "nginx:1.25", "80", "-1", "+1",
          "0", "0.5", "Prefix", "v1", "networking.k8s.io/v1", "a b", "'quoted'", '"dq"', '"on"', "'0755'",
          "=", "!!str 12", "!custom x", "&a 1", "é", "x#y", "-", "?", "[1, on]", "{a: 0755}"]


# Those no version reads differently: most of a generated text, so that the fast reading is tried often.
ORDINARY = ["true", "False", "null", "~", "0x1F", "1.", ".5", ".inf", "-.Inf", "10.0.0.1", "2024-01-01",
            "2024-01-01T10:00:00Z", "nginx:1.25", "80", "-1", "+1", "0", "0.5", "Prefix", "v1",
            "networking.k8s.io/v1", "a b", "'quoted'", '"dq"', "&a 1", "é", "x#y", "[1, 2]", "{a: b}", "''"]


@st.composite
def scalars(draw: st.DrawFn) -> str:
    return draw(st.sampled_from(TOKENS if draw(st.integers(0, 9)) == 0 else ORDINARY))


@st.composite
def documents(draw: st.DrawFn) -> str:
    lines = []
    for i in range(draw(st.integers(1, 5))):
        key = draw(st.sampled_from(["a", "b", "c", "d", "e", "kind", "<<" if draw(st.integers(0, 9)) == 0 else "f"]))
        shape = draw(st.sampled_from(["scalar", "list", "map"]))
        if shape == "scalar":
            lines.append(f"{key}{i}: {draw(scalars())}")
        elif shape == "list":
            lines.append(f"{key}{i}:")
            lines += [f"  - {draw(scalars())}" for _ in range(draw(st.integers(1, 3)))]
        else:
            lines.append(f"{key}{i}:")
            lines += [f"  k{j}: {draw(scalars())}" for j in range(draw(st.integers(1, 3)))]
    return "\n".join(lines) + "\n"


@st.composite
def texts(draw: st.DrawFn) -> str:
    docs = draw(st.lists(documents(), min_size=1, max_size=3))
    leading = draw(st.sampled_from(["", "---\n", "# a comment\n---\n"]))
    trailing = draw(st.sampled_from(["", "---\n", "...\n"]))
    return leading + "---\n".join(docs) + trailing


def exact(text: str):
    try:
        return [d.data for d in parse_manifest("x.yaml", text.encode())]
    except Exception as err:  # noqa: BLE001 - any refusal: the fast reading must not take the text
        return type(err)


@settings(max_examples=400, deadline=None)
@given(texts())
def test_the_fast_reading_is_the_exact_one_or_none(text: str) -> None:
    fast = fast_documents(text)
    if fast is not None:
        assert [d.data for d in fast] == exact(text), text


@pytest.mark.parametrize("text", [
    "a: yes\n", "a: 0755\n", "a: 12:30\n", "a: 1e3\n", "<<: {b: 1}\n", "a: !!str 1\n", "%YAML 1.1\n---\na: 1\n",
    "- a: 1\n- b: 2\n",  # one document holding a list: not two objects
    "---\n- a: 1\n", "a: 1\na: 2\n", "a: [1\n", "a: +.5\n", "a: 0x1_F\n",
])
def test_forms_read_differently_are_left_to_the_exact_reader(text: str) -> None:
    assert fast_documents(text) is None


def test_ordinary_manifests_take_the_fast_reading_with_equal_results() -> None:
    text = ("apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  annotations:\n    x: \"true\"\n"
            "spec:\n  ports:\n  - port: 80\n    targetPort: 8080\n---\n# empty\n---\n"
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n")
    fast = fast_documents(text)
    assert fast is not None and [d.data for d in fast] == exact(text)


def test_a_file_with_a_problem_is_reported_with_the_exact_readers_line() -> None:
    text = b"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n---\n\n\nkind: Service\nmetadata: {name: x}\n"
    objects, problems = read_objects("x.yaml", text, "x.yaml")
    assert [o["metadata"]["name"] for o in objects] == ["web"]
    assert len(problems) == 1 and problems[0].line == 8, problems
