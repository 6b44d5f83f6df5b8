"""Progress bars for the commands that can take a while: rich's, drawn on stderr.

Every long command (rebuild, compact, verify, export, import, the benches) shows its
progress through :func:`bar`, and only to a person watching: both stdout and stderr must
be terminals and ``--json`` not given. Output piped to a file or another program, or
captured by a test, carries no progress bytes at all (no carriage return, no escape).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from lessonledger.ops import interrupts
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["Bar", "bar", "watching"]


def watching(*, quiet: bool = False) -> bool:
    """True when a bar may be drawn: a person at a terminal, and no ``--json``."""
    return not quiet and sys.stdout.isatty() and sys.stderr.isatty()


class Bar:
    """One task's bar; a silent one (``None`` progress) does nothing and costs nothing."""

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress = progress
        self._task = task

    def update(self, done: int, total: int | None = None) -> None:
        """Set how much is done (and, when it is learned late, of how much)."""
        interrupts.check()
        if self._progress is None or self._task is None:
            return
        if total is None:
            self._progress.update(self._task, completed=done)
        else:
            self._progress.update(self._task, completed=done, total=total)

    def advance(self, steps: int = 1) -> None:
        """Count ``steps`` more done."""
        interrupts.check()
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, steps)

    def say(self, line: str) -> None:
        """A line of its own: above the bar when drawing, else plainly on stderr.

        For commands that already report each finished step as a line (the benches):
        the lines stay where scripts read them, and the bar keeps below them.
        """
        interrupts.check()
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr)


@contextmanager
def bar(label: str, total: int | None = None, *, quiet: bool = False) -> Iterator[Bar]:
    """A progress bar for the block (a spinner when ``total`` is None), if anyone watches.

    Args:
        label: what is being done, shown before the bar.
        total: how many steps, when known.
        quiet: never draw (the command was given ``--json``).
    """
    if not watching(quiet=quiet):
        yield Bar(None, None)
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr)) as progress:
        yield Bar(progress, progress.add_task(label, total=total))
