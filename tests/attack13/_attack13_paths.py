"""Puts the tests' own tools on the import path: ``lesson_agent`` (tests/commands) and
``hubtools`` (tests/sync).

Imported first by the tests here, as tests/attack11a's ``_sync_path`` does; a module name
of its own, since mypy takes two modules of one name for a duplicate.
"""

from __future__ import annotations

import sys
from pathlib import Path

for _dir in ("commands", "sync"):
    _path = str(Path(__file__).resolve().parent.parent / _dir)
    if _path not in sys.path:
        sys.path.insert(0, _path)
