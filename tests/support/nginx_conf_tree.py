"""nginx.conf text → a tree of directives, read as nginx's own lexer reads it, for tests that must show that
no value reached nginx.conf as anything but the arguments it was meant to be.

nginx splits a file into words at whitespace, `;` and `{` outside quotes (a `}` ends a block only where a word
could start, and `${` goes on within a variable's word), drops `#` comments, and
unescapes `\\"`, `\\'`, `\\\\`, `\\t`, `\\r` and `\\n` inside quotes. A `*_by_lua_block` directive is the Lua
module's own: its block is Lua code read up to the brace that closes it (Lua strings, long brackets and
comments may hold braces), kept here as text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "t": "\t", "r": "\r", "n": "\n"}


class ConfSyntaxError(ValueError):
    pass


@dataclass
class Directive:
    name: str
    args: list[str]
    block: list[Directive] | None = None  # the directives inside `{ }`, None for a simple directive
    lua: str | None = None  # the code of a *_by_lua_block
    line: int = 0

    def find(self, name: str) -> list[Directive]:
        """The directives called `name` directly inside this block."""
        return [d for d in self.block or [] if d.name == name]


class _Reader:
    """A position in the text. Lexing goes by regular expressions over the text, not a character at a time: the fuzz
    tests read back thousands of whole nginx.conf files. The line number (for errors and Directive.line) is counted
    only when asked for: the position only moves forward."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self._line = 1
        self._line_counted_to = 0

    @property
    def line(self) -> int:
        self._line += self.text.count("\n", self._line_counted_to, self.at)
        self._line_counted_to = self.at
        return self._line

    def error(self, message: str) -> ConfSyntaxError:
        return ConfSyntaxError(f"line {self.line}: {message}")

    def peek(self) -> str:
        return self.text[self.at:self.at + 1]

    def match(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """`pattern` matched at the position, which moves past it."""
        found = pattern.match(self.text, self.at)
        if found:
            self.at = found.end()
        return found


# One token: whitespace (str.isspace's, which is re's \s) and `#` comments, then a separator, the opening quote of
# a quoted string, or a word as nginx reads it: up to whitespace, ';' or '{', where '}' is a plain character, '{'
# right after '$' ("${name}") is too, and a backslash takes the next character whatever it is. Nothing: the end.
_TOKEN = re.compile(r"(?:\s+|#[^\n]*)*(?:(?P<separator>[;{}])|(?P<quote>[\"'])"
                    r"|(?P<word>(?:\\[\s\S]|\\\Z|[^\s;{\\]|(?<=\$)\{)+))?")
# A quoted string's body up to its closing quote, and its escapes.
_QUOTED = {quote: re.compile(rf"((?:[^{quote}\\]|\\[\s\S])*){quote}") for quote in "\"'"}
_ESCAPE = re.compile(r"\\([\s\S])")
# What matters in Lua code: braces, strings, long brackets, comments.
_LUA_SPECIAL = re.compile(r"[{}\"'\[-]")
_LUA_SHORT_STRING_END = {quote: re.compile(rf"(?:[^{quote}\\\n]|\\[\s\S])*{quote}") for quote in "\"'"}
_LUA_SHORT_STRING_STOP = re.compile(r"(?:[^\\\n]|\\[\s\S])*")


def parse(text: str) -> list[Directive]:
    """The top-level directives of `text`; raises ConfSyntaxError where nginx would refuse the syntax."""
    reader = _Reader(text)
    directives = _parse_block(reader, closed_by_brace=False)
    return directives


def _parse_block(reader: _Reader, *, closed_by_brace: bool) -> list[Directive]:
    directives: list[Directive] = []
    words: list[str] = []
    line = 0
    while True:
        word, end = _next_word(reader)
        if word is not None:
            if not words:
                line = reader.line
            words.append(word)
            continue
        if end == ";":
            if not words:
                raise reader.error("unexpected ';'")
            directives.append(Directive(words[0], words[1:], line=line))
        elif end == "{":
            if not words:
                raise reader.error("unexpected '{'")
            if words[0].endswith("_by_lua_block"):
                directives.append(Directive(words[0], words[1:], lua=_lua_block(reader), line=line))
            else:
                directives.append(Directive(words[0], words[1:], block=_parse_block(reader, closed_by_brace=True),
                                            line=line))
        elif end == "}":
            if not closed_by_brace or words:
                raise reader.error("unexpected '}'")
            return directives
        else:  # end of the text
            if closed_by_brace or words:
                raise reader.error("unexpected end of file, expecting '}' or ';'")
            return directives
        words = []


def _next_word(reader: _Reader) -> tuple[str | None, str]:
    """(word, "") for a word, or (None, one of ";", "{", "}", "") for a separator or the end."""
    token = _TOKEN.match(reader.text, reader.at)
    assert token is not None  # it may match nothing
    reader.at = token.end()
    kind = token.lastgroup
    if kind == "word":
        return token.group(kind), ""
    if kind == "quote":
        return _quoted(reader, token.group(kind)), ""
    if kind == "separator":
        return None, token.group(kind)
    return None, ""


def _quoted(reader: _Reader, quote: str) -> str:
    body = reader.match(_QUOTED[quote])
    if body is None:
        reader.at = len(reader.text)
        raise reader.error("unterminated quoted string")
    nxt = reader.peek()
    if nxt and not nxt.isspace() and nxt not in ";{)":  # nginx takes ')' there, not '}'
        raise reader.error(f"unexpected {nxt!r} after a quoted string")
    return _ESCAPE.sub(lambda escape: _ESCAPES.get(escape.group(1), escape.group()), body.group(1))


def _lua_block(reader: _Reader) -> str:
    """Lua code up to the `}` that closes the block (consumed, not returned)."""
    start, depth = reader.at, 0
    while True:
        special = _LUA_SPECIAL.search(reader.text, reader.at)
        if special is None:
            reader.at = len(reader.text)
            raise reader.error("unterminated *_by_lua_block")
        ch, reader.at = special.group(), special.end()
        if ch == "}":
            if depth == 0:
                return reader.text[start:reader.at - 1]
            depth -= 1
        elif ch == "{":
            depth += 1
        elif ch in "\"'":
            _lua_short_string(reader, ch)
        elif ch == "[" and reader.peek() in "[=":
            level = _long_bracket_level(reader)
            if level is not None:
                _lua_long_string(reader, level)
        elif ch == "-" and reader.peek() == "-":
            reader.at += 1
            if reader.peek() == "[":
                reader.at += 1
                level = _long_bracket_level(reader)
                if level is not None:
                    _lua_long_string(reader, level)
                    continue
            end = reader.text.find("\n", reader.at)
            reader.at = len(reader.text) if end < 0 else end


def _lua_short_string(reader: _Reader, quote: str) -> None:
    if reader.match(_LUA_SHORT_STRING_END[quote]) is None:
        reader.match(_LUA_SHORT_STRING_STOP)  # up to the line's end or the text's
        reader.at = min(reader.at + 1, len(reader.text))  # the newline, taken as the string's last character
        raise reader.error("unterminated Lua string")


def _long_bracket_level(reader: _Reader) -> int | None:
    """After a '[': the level of a long bracket `[==[` (its '=' and second '[' consumed), or None."""
    level, at = 0, reader.at
    while at < len(reader.text) and reader.text[at] == "=":
        level, at = level + 1, at + 1
    if at < len(reader.text) and reader.text[at] == "[":
        reader.at = at + 1
        return level
    return None


def _lua_long_string(reader: _Reader, level: int) -> None:
    closing = "]" + "=" * level + "]"
    end = reader.text.find(closing, reader.at)
    if end < 0:
        raise reader.error("unterminated Lua long string")
    reader.at = end + len(closing)


def walk(directives: list[Directive]) -> list[tuple[tuple[str, ...], Directive]]:
    """Every directive with the names of the blocks around it (("http", "server", "location"), d)."""
    found: list[tuple[tuple[str, ...], Directive]] = []

    def visit(block: list[Directive], path: tuple[str, ...]) -> None:
        for directive in block:
            found.append((path, directive))
            if directive.block is not None:
                visit(directive.block, (*path, directive.name))
    visit(directives, ())
    return found


def words(value: str | list[str] | tuple[str, ...]) -> list[str]:
    """The arguments a setting value stands for (services/nginxconf/render.py: split on spaces)."""
    return [w for w in value.split(" ") if w] if isinstance(value, str) else [str(v) for v in value]
