"""Stored text as a person or a prompt may read it: controls shown, never obeyed.

Anything stored (an actor, a principal, a lesson's text, an error) can hold characters
that change what a reader sees rather than showing themselves: a line break that starts
a forged log line, a NUL, a terminal escape (ESC, BEL, the C1 CSI), a Unicode line or
paragraph separator, or a bidi override that reorders the rest of the line. Every human
output passes stored text through :func:`printable`; ``--json`` keeps it exact.
"""

from __future__ import annotations

__all__ = ["printable"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: C0 controls, DEL and C1 controls, as ``\xNN`` (or ``\n``, ``\r``, ``\t``).
_ESCAPES: dict[int, str] = {
    c: _NAMED.get(chr(c), f"\\x{c:02x}") for c in (*range(0x20), *range(0x7F, 0xA0))
}
#: Line and paragraph separators and bidi controls (marks, embeddings, overrides,
#: isolates), as ``\uNNNN``.
_ESCAPES |= {
    c: f"\\u{c:04x}"
    for c in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F),
              *range(0x2066, 0x206A))
}


def printable(text: str) -> str:
    r"""``text`` with every control, separator and bidi character shown as an escape.

    A line break becomes ``\n`` (a backslash and an ``n``), NUL ``\x00``, ESC ``\x1b``,
    U+202E ``\u202e``. Everything else, backslashes included, is left as it is, so
    the result is printable and applying it twice changes nothing more.
    """
    return text.translate(_ESCAPES)
