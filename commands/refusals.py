"""Text that must never enter the ledger: anything shaped like a credential.

A lesson can never grant autonomy either, but that needs no check here: lessons are
only text, and nothing in lessonledger reads a lesson to decide what needs confirmation.
"""

from __future__ import annotations

import re

from lessonledger.commands.errors import CredentialError

__all__ = ["refuse_credentials"]

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx)) for name, rx in (
        ("private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
        ("AWS access key", r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
        ("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ("API secret key", r"\bsk-[A-Za-z0-9_-]{20,}"),
        ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
        ("JSON web token", r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
        ("bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}"),
        ("password assignment", r"(?i)\b(pass(word)?|passwd|pwd)\s*[=:]\s*\S+"),
        ("secret assignment",
         r"(?i)\b(api[_-]?key|secret|token|access[_-]?key|auth)\s*[=:]\s*['\"]?[A-Za-z0-9/+_.-]{8,}"),
        ("credentials in a URL", r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@"),
    )
)


def refuse_credentials(text: str, field: str) -> None:
    """Raise :class:`CredentialError` naming the pattern if ``text`` looks like a secret."""
    for name, pattern in _PATTERNS:
        if pattern.search(text):
            raise CredentialError(name, field)
