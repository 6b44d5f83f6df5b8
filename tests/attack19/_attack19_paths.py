"""Puts the tests' own tools on the import path (tests/sync, tests/commands, tests)."""

from __future__ import annotations

import sys
from pathlib import Path

for _dir in ("sync", "commands", "."):
    _path = str((Path(__file__).resolve().parent.parent / _dir).resolve())
    if _path not in sys.path:
        sys.path.insert(0, _path)
