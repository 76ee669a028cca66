"""nginx.conf text → a tree of directives, read as nginx's own lexer reads it, for tests that must show that
no value reached nginx.conf as anything but the arguments it was meant to be.

nginx splits a file into words at whitespace, `;` and `{` outside quotes (a `}` ends a block only where a word
could start, and `${` goes on within a variable's word), drops `#` comments, and
unescapes `\\"`, `\\'`, `\\\\`, `\\t`, `\\r` and `\\n` inside quotes. A `*_by_lua_block` directive is the Lua
module's own: its block is Lua code read up to the brace that closes it (Lua strings, long brackets and
comments may hold braces), kept here as text.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass
class _Reader:
    text: str
    at: int = 0
    line: int = 1
    words: list[str] = field(default_factory=list)

    def error(self, message: str) -> ConfSyntaxError:
        return ConfSyntaxError(f"line {self.line}: {message}")

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def take(self) -> str:
        ch = self.peek()
        self.at += 1
        if ch == "\n":
            self.line += 1
        return ch


def parse(text: str) -> list[Directive]:
    """The top-level directives of `text`; raises ConfSyntaxError where nginx would refuse the syntax."""
    reader = _Reader(text)
    directives = _parse_block(reader, closed_by_brace=False)
    return directives


def _parse_block(reader: _Reader, *, closed_by_brace: bool) -> list[Directive]:
    directives: list[Directive] = []
    words: list[str] = []
    line = reader.line
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
    while True:
        ch = reader.peek()
        if ch == "":
            return None, ""
        if ch.isspace():
            reader.take()
        elif ch == "#":
            while reader.peek() not in ("", "\n"):
                reader.take()
        else:
            break
    if ch in ";{}":
        reader.take()
        return None, ch
    if ch in "\"'":
        reader.take()
        return _quoted(reader, ch), ""
    # Inside a word, as in nginx: '}' is a plain character, and '{' right after '$' ("${name}") is too.
    word = []
    while reader.peek() and not reader.peek().isspace() and (reader.peek() not in ";{"
                                                             or reader.peek() == "{" and word[-1:] == ["$"]):
        ch = reader.take()
        if ch == "\\" and reader.peek():
            word.append(ch)
            ch = reader.take()
        word.append(ch)
    return "".join(word), ""


def _quoted(reader: _Reader, quote: str) -> str:
    word = []
    while True:
        ch = reader.take()
        if ch == "":
            raise reader.error("unterminated quoted string")
        if ch == quote:
            nxt = reader.peek()
            if nxt and not nxt.isspace() and nxt not in ";{)":  # nginx takes ')' there, not '}'
                raise reader.error(f"unexpected {nxt!r} after a quoted string")
            return "".join(word)
        if ch == "\\" and reader.peek():
            escaped = reader.take()
            word.append(_ESCAPES.get(escaped, "\\" + escaped))
        else:
            word.append(ch)


def _lua_block(reader: _Reader) -> str:
    """Lua code up to the `}` that closes the block (consumed, not returned)."""
    start, depth = reader.at, 0
    while True:
        ch = reader.take()
        if ch == "":
            raise reader.error("unterminated *_by_lua_block")
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
            reader.take()
            if reader.peek() == "[":
                reader.take()
                level = _long_bracket_level(reader)
                if level is not None:
                    _lua_long_string(reader, level)
                    continue
            while reader.peek() not in ("", "\n"):
                reader.take()


def _lua_short_string(reader: _Reader, quote: str) -> None:
    while True:
        ch = reader.take()
        if ch in ("", "\n"):
            raise reader.error("unterminated Lua string")
        if ch == "\\":
            reader.take()
        elif ch == quote:
            return


def _long_bracket_level(reader: _Reader) -> int | None:
    """After a '[': the level of a long bracket `[==[` (its '=' and second '[' consumed), or None."""
    level, at = 0, reader.at
    while at < len(reader.text) and reader.text[at] == "=":
        level, at = level + 1, at + 1
    if at < len(reader.text) and reader.text[at] == "[":
        while reader.at <= at:
            reader.take()
        return level
    return None


def _lua_long_string(reader: _Reader, level: int) -> None:
    closing = "]" + "=" * level + "]"
    end = reader.text.find(closing, reader.at)
    if end < 0:
        raise reader.error("unterminated Lua long string")
    while reader.at < end + len(closing):
        reader.take()


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
