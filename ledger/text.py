"""Stored text as a person or a prompt may read it: controls shown, never obeyed.

Anything stored (an actor, a principal, a lesson's text, an error) can hold characters
that change what a reader sees rather than showing themselves: a line break that starts
a forged log line, a NUL, a terminal escape (ESC, BEL, the C1 CSI), a Unicode line or
paragraph separator, or a bidi override that reorders the rest of the line. Every human
output passes stored text through :func:`printable`; ``--json`` keeps it exact.

A check that matches text (credentials, instruction injection, permission names) reads
it through :func:`folded` first, so that an invisible character or a lookalike does not
hide a shape the check knows.
"""

from __future__ import annotations

import unicodedata

__all__ = ["folded", "printable"]

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
#: Format characters (Unicode category Cf, as of Unicode 15): invisible, yet a model
#: reads them (tag characters can spell a hidden instruction) and a name holding a
#: zero-width space prints as another's. Shown as ``\uNNNN`` (``\UNNNNNNNN`` past the BMP).
_FORMAT = ((0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F),
           (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
           (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
           (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x1343F),
           (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F))
_ESCAPES |= {
    c: f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"
    for first, last in _FORMAT for c in range(first, last + 1)
}


def printable(text: str) -> str:
    r"""``text`` with every control, separator and bidi character shown as an escape.

    A line break becomes ``\n`` (a backslash and an ``n``), NUL ``\x00``, ESC ``\x1b``,
    U+202E ``\u202e``. Everything else, backslashes included, is left as it is, so
    the result is printable and applying it twice changes nothing more.
    """
    return text.translate(_ESCAPES)


#: Lookalikes NFKC leaves alone, mapped to the ASCII they imitate (angle brackets and
#: vertical bars: what role tags and template tokens are made of).
_LOOKALIKES = str.maketrans({
    **dict.fromkeys("\u2039\u2329\u27e8\u3008\u276e\u02c2\u1438\u226a", "<"),
    **dict.fromkeys("\u203a\u232a\u27e9\u3009\u276f\u02c3\u1433\u226b", ">"),
    **dict.fromkeys("\u00a6\u01c0\u2223\u23d0\u2502\u05c0", "|"),
    # Quotes, colons and blanks a credential's "key = 'value'" may be spelt with.
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
    **dict.fromkeys("\u2236\u02d0\ua789\u05c3", ":"),
    "\u2800": " ", "\u3164": " ", "\u115f": " ", "\u1160": " ",
})


def folded(text: str) -> str:
    """``text`` as a pattern check reads it: format characters dropped, NFKC, lookalikes.

    Format characters (Unicode category Cf: zero-width spaces and joiners, the soft
    hyphen, bidi controls, the BOM) are removed, the rest is NFKC-normalised (fullwidth
    letters become ASCII, a no-break space a space), combining marks left over are
    removed, and the angle-bracket, vertical-bar, quote, colon and blank lookalikes NFKC
    keeps are made ASCII. Case is kept.
    """
    if text.isascii():
        return text
    kept = "".join(c for c in text if unicodedata.category(c) != "Cf")
    normal = unicodedata.normalize("NFKC", kept)
    # Marks NFKC did not compose into a letter (a grapheme joiner, a variation selector)
    # only hide what they sit in; a check reads the text without them.
    bare = "".join(c for c in normal if unicodedata.category(c) != "Mn")
    return bare.translate(_LOOKALIKES)
