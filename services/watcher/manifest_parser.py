"""Manifest file bytes → documents, each with the line it starts on; syntax errors with file and line.

YAML files may hold several documents; JSON files one or more concatenated values (as `kubectl apply`
takes them). Values are kept as the API would see them: YAML timestamps stay strings (an API object
carries RFC 3339 strings, and msgpack has no datetime), and a key given twice in one mapping is an
error rather than a silent "last one wins" that could drop a route without a word.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

try:
    # Typed as its pure-Python twin: the same constructor and resolver over libyaml's parser.
    _BaseLoader: type[yaml.SafeLoader] = yaml.CSafeLoader  # type: ignore[assignment]
except AttributeError:  # PyYAML built without libyaml: same behaviour, slower
    _BaseLoader = yaml.SafeLoader

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)
MANIFEST_SUFFIXES = YAML_SUFFIXES + JSON_SUFFIXES


class ManifestSyntaxError(ValueError):
    """A file that cannot be read as YAML/JSON; `line` and `column` are 1-based (0 when unknown)."""

    def __init__(self, message: str, *, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(kw_only=True)
class Document:
    """One document of a manifest file. `index` and the line numbers are 1-based."""
    index: int
    line: int
    data: Any
    # For a document with an `items` sequence (a List): the line each item starts on.
    item_lines: list[int] = field(default_factory=list)
    # The reader guarantees JSON values only (yaml_fast.py): the check of each value can be skipped.
    json_values: bool = False


def _key_given_twice(mapping: yaml.Node, key: yaml.Node, *, first_line: int) -> yaml.YAMLError:
    return yaml.constructor.ConstructorError(
        "while constructing a mapping", mapping.start_mark,
        f"key {key.value!r} is given twice (first on line {first_line}); remove one of them", key.start_mark)


class _ManifestLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            # Scalar keys are compared as written (with their resolved tag), which is cheap; other keys
            # (sequences, mappings) are too rare in manifests to be worth constructing twice.
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<` merges may legitimately be overridden by the mapping's own keys
            first_line = seen.get((key_node.tag, key_node.value))
            if first_line is not None:
                raise _key_given_twice(node, key_node, first_line=first_line)
            seen[(key_node.tag, key_node.value)] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


# Timestamps stay strings: drop the implicit timestamp resolver (the class attribute is shared, so copy it).
_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}

_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
# Keys and short strings ("Prefix", "TCP", "networking.k8s.io/v1", "default") repeat in every object: one
# shared copy each (sys.intern) took 30,000 parsed objects from 78 to 42 MiB. Interned strings are freed
# with their last reference, so unique names cost nothing extra.
_SHARED_MAX = 24
# Deeper than any manifest nests; an alias that refers to itself would recurse forever.
_MAX_DEPTH = 100
# The implicit tag of each plain scalar seen, by its text: manifests repeat the same few hundred words
# ("Prefix", "80", "nginx", "true"), and PyYAML's resolver tries its regular expressions on each again.
_resolved: dict[str, str] = {}
_RESOLVED_MAX = 100_000


def _resolve_cached(loader: _ManifestLoader, kind: type, value: str, implicit: tuple[bool, bool]) -> str:
    if kind is not yaml.ScalarNode or not implicit[0]:
        return _BaseLoader.resolve(loader, kind, value, implicit)
    tag = _resolved.get(value)
    if tag is None:
        if len(_resolved) >= _RESOLVED_MAX:
            _resolved.clear()
        tag = _resolved[value] = _BaseLoader.resolve(loader, kind, value, implicit)
    return tag


_ManifestLoader.resolve = _resolve_cached


class _NeedsFullConstructor(Exception):
    """A document uses what only PyYAML's constructor builds right: merge keys, tagged collections,
    collection keys, or an alias that refers to itself."""


def _build(loader: _ManifestLoader, node: yaml.Node, depth: int = 0) -> Any:
    """The value of `node`, as _ManifestLoader.construct_document would make it, faster: strings, lists and
    dicts are built here, other scalars by PyYAML's own constructors (ints, bools, nulls, floats as YAML 1.1
    reads them)."""
    if depth > _MAX_DEPTH:
        raise _NeedsFullConstructor()
    kind = type(node)
    if kind is yaml.ScalarNode:
        if node.tag == _STR_TAG:
            return sys.intern(node.value) if len(node.value) <= _SHARED_MAX else node.value
        constructor = loader.yaml_constructors.get(node.tag) or loader.yaml_constructors[None]
        return constructor(loader, node)
    if kind is yaml.SequenceNode and node.tag == _SEQ_TAG:
        return [_build(loader, item, depth + 1) for item in node.value]
    if kind is not yaml.MappingNode or node.tag != _MAP_TAG:
        raise _NeedsFullConstructor()
    mapping: dict[Any, Any] = {}
    key_nodes: dict[tuple[str, str], yaml.Node] = {}
    for key_node, value_node in node.value:
        if type(key_node) is not yaml.ScalarNode or key_node.tag == "tag:yaml.org,2002:merge":
            raise _NeedsFullConstructor()
        first = key_nodes.setdefault((key_node.tag, key_node.value), key_node)
        if first is not key_node:
            raise _key_given_twice(node, key_node, first_line=first.start_mark.line + 1)
        key = _build(loader, key_node, depth + 1)
        mapping[sys.intern(key) if type(key) is str else key] = _build(loader, value_node, depth + 1)
    return mapping


def _construct(loader: _ManifestLoader, node: yaml.Node) -> Any:
    try:
        return _build(loader, node)
    except _NeedsFullConstructor:
        return loader.construct_document(node)


def decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ManifestSyntaxError(f"not UTF-8 text (byte {err.start}); save the file as UTF-8", line=line) from None


def _item_lines(node: yaml.Node) -> list[int]:
    if not isinstance(node, yaml.MappingNode):
        return []
    for key_node, value_node in node.value:
        if key_node.value == "items" and isinstance(value_node, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value_node.value]
    return []


def _parse_yaml(text: str) -> list[Document]:
    loader = _ManifestLoader(text)
    documents: list[Document] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            data = _construct(loader, node)
            if data is None:
                continue  # an empty document (a stray `---`), as kubectl skips it
            documents.append(Document(index=len(documents) + 1, line=node.start_mark.line + 1, data=data,
                                      item_lines=_item_lines(node)))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        # The problem is often found lines after its cause (an unclosed bracket): say where that began.
        context = err.context or ""
        if context and err.context_mark and mark and err.context_mark.line != mark.line:
            context += f" that starts on line {err.context_mark.line + 1}"
        reason = " ".join(part for part in (err.problem, context and f"({context})") if part)
        raise ManifestSyntaxError(reason or str(err), line=mark.line + 1 if mark else 0,
                                  column=mark.column + 1 if mark else 0) from None
    except yaml.YAMLError as err:
        raise ManifestSyntaxError(str(err)) from None
    finally:
        loader.dispose()
    return documents


def _parse_json(text: str) -> list[Document]:
    decoder = json.JSONDecoder()
    documents: list[Document] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return documents
        try:
            data, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            raise ManifestSyntaxError(err.msg, line=err.lineno, column=err.colno) from None
        documents.append(Document(index=len(documents) + 1, line=text.count("\n", 0, position) + 1, data=data))
        position = end


def parse_manifest(file_name: str, data: bytes) -> list[Document]:
    """The documents of one manifest file; raises ManifestSyntaxError when any part of it is unreadable."""
    text = decoded(data)
    if file_name.endswith(JSON_SUFFIXES):
        return _parse_json(text)
    return _parse_yaml(text)
