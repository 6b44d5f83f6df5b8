"""Puts the sync tests' own tools (tests/sync: ``hubtools``) on the import path.

Imported first by the hub tests here; a ``conftest.py`` would do it too, but mypy takes
two of them for one duplicated module.
"""

from __future__ import annotations

import sys
from pathlib import Path

_SYNC = str(Path(__file__).resolve().parent.parent / "sync")
if _SYNC not in sys.path:
    sys.path.insert(0, _SYNC)
