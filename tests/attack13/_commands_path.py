"""Puts the lesson tests' own tools (tests/commands: ``lesson_agent``) on the import path.

Imported first by the tests here, as tests/attack11a's ``_sync_path`` does for hubtools.
"""

from __future__ import annotations

import sys
from pathlib import Path

_COMMANDS = str(Path(__file__).resolve().parent.parent / "commands")
if _COMMANDS not in sys.path:
    sys.path.insert(0, _COMMANDS)
