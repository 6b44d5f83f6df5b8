"""Making a file, or a directory's entries, durable: shared by compaction and the index."""

from __future__ import annotations

import os

__all__ = ["fsync_path"]


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file, or a directory's entries (a rename into it, say), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
