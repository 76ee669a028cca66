"""A fast reading of YAML manifests with yaml-rs (Rust), used only where it reads the same as the exact reader.

The exact reader (manifest_parser) reads YAML as PyYAML does under YAML 1.1, as Kubernetes' own YAML library
mostly does too: `yes`/`no`/`on`/`off` are booleans, `0755` is octal, `12:30` is a number, `<<` merges
mappings. yaml-rs reads YAML 1.2, where those are strings or other numbers. Its reading is used only for a
text in which none of those forms (nor a tag) can occur, checked by one conservative search over the text,
and only when the documents it returns can only be the ones the exact reader would return; otherwise
`fast_documents` returns None and the exact reader runs. On 30,000 documents yaml-rs reads in about a tenth
of the exact reader's time (bench/bench_manifest_parse.py).

Line numbers are not known here: a caller that has a problem to report about a document reads the file
again with the exact reader, which knows them (manifests.py does).
"""
from __future__ import annotations

import re
import sys
from typing import Any

import yaml_rs

from services.watcher.manifest_parser import Document

# Any token that YAML 1.1 and 1.2 read differently, quoted or not (a quoted one only costs the exact reader):
# 1.1 booleans, numbers with a leading 0 (octal in 1.1), binary and 0o numbers, base-60 numbers, exponents,
# numbers with underscores, signed fractions without a leading digit, `=` (YAML 1.1's value key), merge
# keys, tags, anchors (PyYAML refuses one name given twice) and directives.
_DIVERGENT_TOKEN = re.compile(r"""
      yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|=|<<|[!&%].*
    | [-+]?0[0-9_]+(?:\.[0-9_]*)?
    | [-+]?0[bo][0-9a-fA-F_]+
    | [-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?
    | [-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+
    | [-+]\.[0-9].*
    | [-+]?[0-9.][0-9a-fA-FxX_.]*_[0-9a-fA-FxX_.]*
""", re.VERBOSE)
# Words as YAML could read them as scalars: split at blanks and flow punctuation. A text has few distinct ones.
_FLOW_PUNCTUATION = re.compile(r"[\[\]{},#]+")
_DOCUMENT_START = re.compile(r"^---(?:[ \t]|$)", re.MULTILINE)
_CONTENT_LINE = re.compile(r"^[ \t]*[^\s#]", re.MULTILINE)
# As the exact reader: one shared copy of each key and short string (manifests repeat the same few hundred).
_SHARED_MAX = 24


def fast_documents(text: str) -> list[Document] | None:
    """The documents of `text` (line numbers 0), or None when the exact reader must read it."""
    if any(_DIVERGENT_TOKEN.fullmatch(token.strip("\"':")) for token in _words(text)):
        return None
    try:
        result = yaml_rs.loads(text, parse_datetime=False)
    except Exception:  # noqa: BLE001 - any refusal is the exact reader's to explain, with its line
        return None
    documents = _split(text, result)
    if documents is None:
        return None
    try:
        return [Document(index=i, line=0, data=_shared(data), json_values=True) for i, data in enumerate(documents, 1)]
    except _NotJson:
        return None  # the exact reader says where and what


def _words(text: str) -> set[str]:
    """The distinct runs of characters other than blanks and flow punctuation ([]{},#) in `text`. Splitting at
    blanks first (str.split, which knows the same blanks as the regular expression's \\s) and then only the
    few distinct pieces that hold punctuation takes a third of the time of one search over the whole text."""
    words: set[str] = set()
    for piece in set(text.split()):
        if _FLOW_PUNCTUATION.search(piece):
            words.update(word for word in _FLOW_PUNCTUATION.split(piece) if word)
        else:
            words.add(piece)
    return words


def _split(text: str, result: Any) -> list[dict] | None:
    """yaml-rs returns one document as itself and several as a list: which one it is follows from the text's
    document markers. Only mappings are taken (a manifest document is an object); None (an empty document)
    is skipped, as the exact reader skips it."""
    first_marker = _DOCUMENT_START.search(text)
    before_first = text if first_marker is None else text[:first_marker.start()]
    expected = len(_DOCUMENT_START.findall(text)) + (1 if _CONTENT_LINE.search(before_first) else 0)
    if expected <= 1:
        documents = [result]
    elif isinstance(result, list) and len(result) == expected:
        documents = result
    else:
        return None
    if not all(document is None or isinstance(document, dict) for document in documents):
        return None
    return [document for document in documents if document is not None]


class _NotJson(Exception):
    """A mapping key that is not a string, or a value that is not JSON's."""


def _key(key: Any) -> str:
    if type(key) is not str:
        raise _NotJson
    return sys.intern(key)


def _shared(value: Any) -> Any:
    """`value` with one shared copy of each key and short string, checked to hold JSON values only."""
    kind = type(value)
    if kind is str:
        return sys.intern(value) if len(value) <= _SHARED_MAX else value
    if kind is dict:
        return {_key(k): _shared(v) for k, v in value.items()}
    if kind is list:
        return [_shared(item) for item in value]
    if value is None or kind in (int, float, bool):
        return value
    raise _NotJson
