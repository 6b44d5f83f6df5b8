"""One hub per home: its writer holds ``<home>/hub.lock`` while it serves.

The design has one writer per ledger, the hub, which sequences every agent's commands.
A second ``serve`` on the same home would start a second sequencer behind another
endpoint: nothing would be lost (LMDB orders their commits), but clients of the two
would see each other's writes only after a fold, and ``status``, batches and metrics
would each tell half the story. So the second is refused and told where the first
serves. The lock is a ``flock``: it goes with the process, however it ends, and a hub
restarted after a SIGKILL takes it again; the file holds only the holder's pid and
endpoint, to say so.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from lessonledger.ledger.errors import LedgerConfigError

__all__ = ["HUB_LOCK", "HubRunningError", "hold"]

HUB_LOCK = "hub.lock"
#: How long a starting hub waits for one that is stopping (its writer is killed when
#: its front dies, but not in the same instant).
WAIT = 1.0


class HubRunningError(LedgerConfigError):
    """Another hub serves this home; nothing was started.

    Attributes:
        home: the home's directory.
        holder: what the running hub wrote: its pid and endpoint (may be empty).
    """

    def __init__(self, home: str, holder: str) -> None:
        where = f" ({holder})" if holder else ""
        super().__init__(
            f"home {home} is already served by a hub{where}; send work there with --to, "
            "or stop it first (one hub per home)")
        self.home = home
        self.holder = holder


def hold(home: str, endpoint: str, *, wait: float = WAIT) -> int:
    """Take the home's hub lock for this process; the descriptor that holds it.

    Raises:
        HubRunningError: another process holds it for ``wait`` seconds.
        LedgerConfigError: the lock file cannot be made or opened.
    """
    path = Path(home) / HUB_LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as e:
        msg = (f"cannot take the hub lock {path} ({e.strerror}); a hub writes this file in "
               "its home: check the home's permissions and that the path is free")
        raise LedgerConfigError(msg) from None
    until = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= until:
                holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
                os.close(fd)
                raise HubRunningError(home, holder) from None
            time.sleep(0.05)
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {endpoint}\n".encode(), 0)
    return fd
