"""Section anchors of an authored skill: where in the base a delta attaches.

An anchor is a heading's slug and the digest of its section, computed the same way on
every machine from the text alone:

- a heading is an ATX Markdown line (``#`` to ``######``, then a space) outside a fenced
  code block (fences are lines starting with three backticks or tildes);
- a section runs from its heading to the line before the next heading of any level;
- the slug is the heading text, NFKC-normalised and lower-cased, each run of characters
  that are neither letters nor digits made one ``-``, trimmed (``section`` when nothing
  is left), cut to 200 characters; a slug seen before in the same body gets ``-2``,
  ``-3``, … in order (the first of these not taken, cut to stay within 200);
- the section digest is the SHA-256 of the section's lines with trailing white space
  removed and trailing blank lines dropped, joined by newlines (so white space at line
  ends, blank lines at its end or CRLF line ends do not move it); the body digest, by
  contrast, is the SHA-256 of the exact UTF-8 bytes, because the off-state must return
  them byte for byte.

A body with no heading has one anchor, :data:`WHOLE_BODY`, over all of it. Text before
the first heading belongs to no section.
"""

from __future__ import annotations

import re
import unicodedata
from hashlib import sha256

from lessonledger.ledger.events import SectionAnchor

__all__ = ["WHOLE_BODY", "anchors", "body_digest", "headings", "slug"]

#: The anchor of a body that has no heading: the whole of it.
WHOLE_BODY = "(body)"

#: A slug's length at most (an anchor is a Name): cut before numbering, so cut slugs
#: that agree are numbered too.
_MAX_SLUG = 200
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_NOT_WORD = re.compile(r"[^\w]+|_+")


def body_digest(text: str) -> str:
    """The SHA-256 (hex) of the exact UTF-8 bytes of a skill body."""
    return sha256(text.encode()).hexdigest()


def slug(heading: str) -> str:
    """A heading's slug: lower-case words joined by ``-``."""
    words = _NOT_WORD.sub("-", unicodedata.normalize("NFKC", heading).lower()).strip("-")
    return words or "section"


def _digest(lines: list[str]) -> str:
    kept = [line.rstrip() for line in lines]
    while kept and not kept[-1]:
        kept.pop()
    return sha256("\n".join(kept).encode()).hexdigest()


def _starts(lines: list[str]) -> list[tuple[int, str]]:
    starts: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            starts.append((number, match.group(2)))
    return starts


def headings(text: str) -> list[str]:
    """Every heading's own text (what its slug is made of), in order."""
    return [heading for _, heading in _starts(text.splitlines())]


def anchors(text: str) -> list[SectionAnchor]:
    """Every section's anchor, in the order they appear (the whole body's if none)."""
    lines = text.splitlines()
    starts = _starts(lines)
    if not starts:
        return [SectionAnchor(slug=WHOLE_BODY, digest=_digest(lines))]
    seen: dict[str, int] = {}
    taken: set[str] = set()
    found = []
    for index, (start, heading) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(lines)
        stem = name = slug(heading)[:_MAX_SLUG]
        while name in taken:
            seen[stem] = seen.get(stem, 1) + 1
            suffix = f"-{seen[stem]}"
            name = f"{stem[:_MAX_SLUG - len(suffix)]}{suffix}"
        taken.add(name)
        found.append(SectionAnchor(slug=name, digest=_digest(lines[start:end])))
    return found
