"""Instruction-injection text: what a learned delta or fact must never carry.

Today an injected instruction lasts one turn; a persisted one would last for good. So
every delta payload and fact value is checked at the write path, as credentials are
(:mod:`lessonledger.commands.refusals`), against a few shapes that only an attack or a
prompt template has any reason to write:

- an order to drop earlier instructions ("ignore previous instructions", "disregard
  the above rules", "forget your guidelines");
- a claim of a new identity or new instructions ("you are now", "new instructions:");
- chat role tags and template tokens (``<system>``, ``</assistant>``, ``<|im_start|>``,
  ``[INST]``, ``<<SYS>>``, a line opening ``system:``);
- tool-call markup (``<tool_call>``, ``<function_calls>``, ``<invoke``, a JSON
  ``"tool_calls":`` or ``"function_call":``).

Text is read as written and also folded (:func:`lessonledger.ledger.text.folded`:
format characters such as zero-width spaces and the soft hyphen dropped, NFKC, so
fullwidth letters are ASCII, angle-bracket and bar lookalikes made ASCII) with each run
of spaces made one, and with HTML character references decoded, so an invisible
character, a lookalike or an entity does not hide a shape.

It is a tripwire, not an analyzer: it names the shape it found, and a person can always
phrase a real preference without one.
"""

from __future__ import annotations

import html
import re

from lessonledger.commands.skill_errors import InjectionError
from lessonledger.ledger.text import folded

__all__ = ["injection_pattern", "refuse_injection"]

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx)) for name, rx in (
        ("override of earlier instructions",
         r"(?i)\b(ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?"
         r"\b(previous|prior|above|earlier|all|any|system|your|the)\b[^.\n]{0,20}?"
         r"\b(instructions?|prompts?|rules?|directions?|guidelines?|guardrails?)\b"),
        ("new identity or instructions",
         r"(?i)\byou(?: are|'re|\u2019re) now\b|\bnew (system )?instructions?\s*:"
         r"|\bfrom now on,? you\b"),
        ("role tag", r"(?i)<\s*/?\s*(system|assistant|user|developer|tool)\s*>"),
        ("template token", r"(?i)<\|[A-Za-z_]+\|>|\[/?INST\]|<</?SYS>>"),
        ("role line", r"(?im)^[\s*_#>`~]*(system|assistant|developer)[*_`~]*\s*:"),
        ("tool-call markup",
         r"(?i)<\s*/?\s*(tool_call|tool_use|function_call|function_calls|invoke|"
         r"[a-z]+:invoke)\b|[\"'](tool_calls|function_call)[\"']\s*:"),
    )
)

#: Runs of white space other than line breaks (a role line needs its line break).
_SPACES = re.compile(r"[^\S\n]+")


def injection_pattern(text: str) -> str | None:
    """The name of the first injection shape found in ``text`` (or its folded form), or None."""
    # Lines as the renderer splits them (``str.splitlines``: CR, VT, FF, FS, NEL, LS, PS
    # too), so a role line behind any of those breaks is seen as one.
    text = "\n".join(text.splitlines())
    plain = _SPACES.sub(" ", folded(text))
    readings = dict.fromkeys([text, plain, html.unescape(plain)])
    for name, pattern in _PATTERNS:
        if any(pattern.search(reading) for reading in readings):
            return name
    return None


def refuse_injection(text: str, field: str) -> None:
    """Raise :class:`InjectionError` naming the shape if ``text`` carries one."""
    found = injection_pattern(text)
    if found is not None:
        raise InjectionError(found, field)
