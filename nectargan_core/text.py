"""Characters that must not reach a terminal or a file name, and how to show them safely.

A run name, a path or a status line read back from disk may hold anything an
earlier version, another tool or a hostile file put there: an escape sequence
that clears the screen or rewrites the previous line, a newline that fakes a
second row, a bidirectional override that reverses what is shown. Config text
refuses such characters (:func:`unsafe_char`); whatever is printed from files
on disk goes through :func:`printable`, which shows them as escapes instead.
"""

from __future__ import annotations

import unicodedata

#: Unicode categories never wanted in names, paths or one-line messages: control
#: characters (C0, DEL, C1; tab and newline included), surrogates (not encodable
#: as UTF-8, so a file holding one cannot be written back), line and paragraph separators.
UNSAFE_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})
#: Bidirectional formatting characters: they reorder how the rest of a line is shown.
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def is_unsafe(char: str) -> bool:
    """Whether ``char`` changes how a terminal shows text rather than being shown itself."""
    return char in BIDI_CONTROLS or unicodedata.category(char) in UNSAFE_CATEGORIES


def unsafe_char(text: str) -> str | None:
    """The first unsafe character of ``text``, or None (fast for plain ASCII)."""
    if text.isascii() and text.isprintable():
        return None
    return next((char for char in text if is_unsafe(char)), None)


def describe_char(char: str) -> str:
    """``U+001B (escape)``: how a message names a character it refuses."""
    name = unicodedata.name(char, "") or {"\x00": "NUL", "\t": "tab", "\n": "newline", "\r": "carriage return",
                                          "\x1b": "escape", "\x7f": "delete"}.get(char, "control character")
    return f"U+{ord(char):04X} ({name.lower()})"


def printable(text: object) -> str:
    """``str(text)`` with every unsafe character shown as an escape (``\\x1b``, ``\\n``, ``\\u202e``)."""
    text = str(text)
    if unsafe_char(text) is None:
        return text
    return "".join(_escape(char) if is_unsafe(char) else char for char in text)


def printable_lines(text: object) -> str:
    """:func:`printable` line by line: a multi-line report keeps its lines, each escaped."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


def _escape(char: str) -> str:
    code = ord(char)
    if char in "\t\n\r":
        return {"\t": "\\t", "\n": "\\n", "\r": "\\r"}[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
