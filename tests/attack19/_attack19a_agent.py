"""Shared helpers for attack18e: the lesson tests' scripted agent, made importable here."""

from __future__ import annotations

import sys
from pathlib import Path

_COMMANDS = str(Path(__file__).resolve().parent.parent / "commands")
if _COMMANDS not in sys.path:
    sys.path.insert(0, _COMMANDS)

from lesson_agent import (  # noqa: E402
    AVOID,
    P1,
    P2,
    P3,
    PREFER,
    T0,
    TARGET,
    Agent,
    day,
    fail,
    ns,
    ok,
)

__all__ = ["AVOID", "P1", "P2", "P3", "PREFER", "T0", "TARGET", "Agent", "day", "fail", "ns",
           "ok"]
