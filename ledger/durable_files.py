"""Making a file, or a directory's entries, durable: shared by compaction, the index, sync."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PARTIAL", "fsync_path", "replace_durably"]

#: What :func:`replace_durably` adds to a file's name for the copy it renames onto it.
PARTIAL = ".partial"


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file, or a directory's entries (a rename into it, say), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` as ``path`` whole or not at all, even if the process is killed.

    The bytes go to ``<name>`` + :data:`PARTIAL` beside it (made anew, never opened through a
    stale one or a symlink planted there), are flushed, and are renamed onto ``path``;
    then the rename is flushed. A kill leaves the old file (or none) and maybe the
    ``.partial`` one, never a file cut short.
    """
    target = Path(path)
    partial = target.with_name(target.name + PARTIAL)
    partial.unlink(missing_ok=True)
    with partial.open("xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, target)
    fsync_path(target.absolute().parent)
