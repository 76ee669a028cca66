"""Proof that a snippet (raw nginx configuration) stays inside the block it is written into.

A configuration-snippet goes into its profile's named location as it is. `nginx -t` proves that it parses,
not that it stayed there: "} location @profile_other { ..." would close the location and reach into other
tenants' settings, and an unterminated quote or statement would swallow the lines after it. This reads the
snippet with nginx's own tokenizing rules (src/core/ngx_conf_file.c: quotes only at the start of a word,
backslash escapes, `${` inside a variable, `#` comments) and accepts it only when every block it opens is
closed within it and nothing is left open at its end. Lua blocks (`*_by_lua_block`) are read by ngx_lua
with Lua's rules, which this does not follow: they are refused (the quoted `*_by_lua` forms work).
"""
from __future__ import annotations

_SPACE = " \t\r\n"
_CONTROL = frozenset(chr(c) for c in range(32)) - set(_SPACE) | {"\x7f"}
_UNESCAPE = {'"': '"', "'": "'", "\\": "\\", "t": "\t", "r": "\r", "n": "\n"}


class SnippetError(ValueError):
    """A snippet that could reach outside its block; the message says what to change."""


def _unescape(raw: str) -> str:
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw) and raw[i + 1] in _UNESCAPE:
            out.append(_UNESCAPE[raw[i + 1]])
            i += 2
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


def _quoted_end(text: str, start: int) -> int:
    """Index of the quote closing the one at `start`."""
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == quote:
            return i
        else:
            i += 1
    raise SnippetError(f"a {quote} quote is never closed; close it")


def _word_end(text: str, start: int) -> int:
    """Index just past an unquoted word starting at `start`."""
    i, variable = start, False
    while i < len(text):
        ch = text[i]
        if ch == "{" and variable:  # "${name}"
            i += 1
            continue
        variable = ch == "$"
        if ch == "\\":
            i += 2
            continue
        if ch in _SPACE or ch in ";{":
            return i
        i += 1
    raise SnippetError("its last directive does not end with ';'; end it with ';'")


def check_contained(snippet: str) -> None:
    """Raise SnippetError unless `snippet` closes every block it opens and leaves nothing open."""
    if bad := next((ch for ch in snippet if ch in _CONTROL), None):
        raise SnippetError(f"control character {bad!r} in a snippet; remove it")
    words: list[str] = []
    depth, i = 0, 0
    while i < len(snippet):
        ch = snippet[i]
        if ch in _SPACE:
            i += 1
        elif ch == "#":
            newline = snippet.find("\n", i)
            i = len(snippet) if newline < 0 else newline + 1
        elif ch == ";":
            words, i = [], i + 1
        elif ch == "{":
            if words and words[0].endswith("_lua_block"):
                raise SnippetError(f"{words[0]} holds Lua, which is read with other rules than nginx's; use the "
                                   f"quoted form ({words[0][:-len('_block')]} '...';) instead")
            depth, words, i = depth + 1, [], i + 1
        elif ch == "}":
            if words or depth == 0:
                raise SnippetError("a '}' closes a block the snippet did not open; remove it (a snippet stays "
                                   "inside the block it is written into)")
            depth, i = depth - 1, i + 1
        elif ch in "\"'":
            end = _quoted_end(snippet, i)
            words.append(_unescape(snippet[i + 1:end]))
            i = end + 1
            if i < len(snippet) and snippet[i] not in _SPACE + ";{)":
                raise SnippetError(f"{snippet[i]!r} right after a closing quote; add a space before it")
        else:
            end = _word_end(snippet, i)
            words.append(_unescape(snippet[i:end]))
            i = end
    if depth:
        raise SnippetError(f"{depth} block(s) opened with '{{' are not closed; close them with '}}'")
    if words:
        raise SnippetError("its last directive does not end with ';'; end it with ';'")
