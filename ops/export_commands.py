"""``lessonledger export`` and ``import``: a home's events as JSON lines, and back.

An export reads the lesson log as it stood when the export began (later appends are not
in it); :mod:`lessonledger.ops.export_format` describes the file and what each selection
takes.

An import **re-appends the events verbatim**; it never runs them through the write path
again. Re-sequencing them as commands would give them new recorded times, salts and
chain links, and the policies would decide again under today's rules: the views would
drift from the source's (creation times, expiry, the ``why`` of each lesson). Replayed as
stored, the new home's log is the source's position for position and link for link,
and its views, folded from it, equal the source's. It takes a whole export written with
``--include-envelopes``, or one of positions 1 to M (``--to M``), which it says it is:
the views are then the source's as of M. A selection by principal or project, or one
from a position past 1, has gaps in its chain and is refused, as is an export without
the stored form.

The file is checked whole before anything is written: the header, every line's JSON,
every position in turn, every chain link from the one before, every body against its
commitment, every readable field against the stored form, no body the export's own
erasures took, and the end at the header's last position and link. A truncated line, an
edited event or a target that is not a new or empty directory is refused with a typed
error (exit code 2), and the target is left as it was. Then the events are written in one
transaction and the views folded from them.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import msgspec
from lessonledger.commands.messages import checked_project
from lessonledger.ledger.envelope import GENESIS, MAX_BODY_BYTES, checked_stored
from lessonledger.ledger.errors import LedgerConfigError, LessonLedgerError, ReplayMismatchError
from lessonledger.ledger.events import ERASED, EVENT_TYPES, Erased, decode_event, tag_of
from lessonledger.ledger.lmdb_env import outside_home
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.ledger.secrets import credential_field
from lessonledger.ops.config import check_home_file, is_home, open_log
from lessonledger.ops.export_format import (
    FORMAT,
    Header,
    Row,
    Selection,
    Stored,
    event_line,
    header_line,
    rows,
    selected,
)
from lessonledger.ops.progress import bar
from lessonledger.ops.render import (
    add_read_only,
    count_option,
    echo,
    json_line,
    nonblank,
    print_json,
    timestamp,
)
from lessonledger.projections.runner import Runner
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import lesson_view, registry

__all__ = ["BadExportError", "ImportTargetError", "register"]


class BadExportError(LessonLedgerError, ValueError):
    """An export file cannot be imported: cut short, edited, or partial; nothing was written.

    Attributes:
        line: the line number where it is wrong (1 is the header), or 0 for the file.
    """

    def __init__(self, line: int, problem: str) -> None:
        where = f"line {line}: " if line else ""
        super().__init__(f"{where}{problem}; nothing was written")
        self.line = line


class ImportTargetError(LedgerConfigError):
    """The import's target already holds something; nothing was written."""


def _cmd_export(args: argparse.Namespace) -> int:
    if args.output is not None:
        _check_output(args.output, Path(args.home))
    if args.start is not None and args.stop is not None and args.start > args.stop:
        msg = (f"--from {args.start} is past --to {args.stop}: no position is in that range; "
               "give --from N --to M with N <= M")
        raise LedgerConfigError(msg)
    if args.project is not None:
        checked_project(args.project)  # a typo would export nothing and say nothing
    selection = Selection(principal=args.principal, project=args.project,
                          start=args.start, stop=args.stop)
    with open_log(args.home, read_only=args.read_only, name=args.log) as log:
        head = log.head()
        start, last = selection.start or 1, min(selection.stop or head, head)
        if args.include_envelopes:  # the form an import replays
            _refuse_cut_inside_a_transaction(log, last, head)
        chain = next((r.stored.link for r in rows(log, last, last)), GENESIS)
        now = time.time_ns()
        header = Header(format=FORMAT, log_name=log.name, head=head, last=last, chain=chain.hex(),
                        selection=selection, envelopes=args.include_envelopes,
                        exported_at=timestamp(now), exported_at_ns=now)
        # No bar when the lines themselves go to the terminal.
        with _output(args.output) as out, bar(
                "export", max(last - start + 1, 0), quiet=args.output is None) as shown:
            out.write(json_line(header_line(header)))
            written = 0
            for row in rows(log, start, last):
                if selected(row, selection):
                    out.write(json_line(event_line(row, envelopes=args.include_envelopes)))
                    written += 1
                shown.advance()
    if args.output is not None:
        echo(f"exported {written:,} events (positions {start:,} to {last:,} of {head:,}) "
             f"to {args.output}")
    return 0


def _refuse_cut_inside_a_transaction(log: EventLog, last: int, head: int) -> None:
    """Refuse ``--to`` between two events of one transaction (they share a recorded time).

    For an export an import replays. Imported, such a prefix would hold a command's event
    without what its policies decided with it: a state no reader of the source ever saw,
    and one the new home never completes (policies run on new events only). Logs written
    before a transaction's events shared their time are not told apart.
    """
    if last >= head:
        return
    at, end = 0, last
    for row in rows(log, last, head):
        if at and row.envelope.recorded_at != at:
            break
        at, end = row.envelope.recorded_at, row.envelope.position
    if end == last:
        return
    msg = (f"--to {last} falls inside a transaction that wrote positions up to {end} "
           f"together (a command and what its policies decided); export --to {end}, or "
           "to a position before that transaction")
    raise LedgerConfigError(msg)


def _check_output(path: Path, home: Path) -> None:
    """Refuse an export file inside the home it reads, or a directory, before anything.

    Inside the home the export is one of its files: over ``data.mdb`` it replaces the
    ledger, anywhere else it holds what a later erasure takes, outside everything that
    erasure compacts.

    Raises:
        LedgerConfigError: ``path`` is a directory or lies inside ``home``.
    """
    if path.is_dir():
        msg = f"{path} is a directory; give the export file's name (-o DIR/all.jsonl)"
        raise LedgerConfigError(msg)
    outside_home(path, home, "export to a file outside the home")


@contextmanager
def _output(path: Path | None) -> Iterator[IO[str]]:
    """Standard output, or ``path``: written beside it, renamed into place when whole.

    So a failed export never leaves a file that looks complete. A path that is there and
    is not a regular file (``/dev/null``, a pipe, a terminal) is written as it is: a
    rename would put a file in the device's place.
    """
    if path is None:
        yield sys.stdout
        return
    if path.exists() and not path.is_file():
        with path.open("w", encoding="utf-8") as f:
            yield f
        return
    partial = path.with_name(path.name + ".partial")
    # Made anew, never opened through what is there: a stale side file, or a symlink
    # planted in its place (to a home's data.mdb, which "w" would truncate).
    partial.unlink(missing_ok=True)
    try:
        with partial.open("x", encoding="utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


# -- import ------------------------------------------------------------------------


class _Line(msgspec.Struct, frozen=True):
    """What an import reads of an event line (the rest is checked against it whole)."""

    stored: Stored | None = None


class _HeaderLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    lessonledger_export: Header


_LOG_NAMES = re.compile(r"[A-Za-z0-9_.-]{1,200}\Z")
_header_decoder = msgspec.json.Decoder(_HeaderLine)
_line_decoder = msgspec.json.Decoder(_Line)
_any_decoder = msgspec.json.Decoder()


#: Longest line an import reads: a maximal body, base64 in the stored form and in the
#: readable one as JSON escapes at worst (six bytes a byte), with room for the envelope.
#: A longer line is no event of ours, and is refused before it is held whole.
MAX_LINE_BYTES = 10 * MAX_BODY_BYTES


def _lines(f: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """Every line with its number; a last line without its newline was cut short."""
    for number in itertools.count(1):
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES:
            raise BadExportError(number, f"the line is longer than {MAX_LINE_BYTES:,} bytes, "
                                 "longer than any event; pass a file `lessonledger export` "
                                 "wrote")
        if not line.endswith(b"\n"):
            raise BadExportError(number, "the file ends inside this line (cut short); "
                                 "export again, or copy the whole file")
        yield number, line


def _header(number: int, line: bytes) -> Header:
    try:
        header = _header_decoder.decode(line).lessonledger_export
    except msgspec.DecodeError as e:
        raise BadExportError(number, f"not a lessonledger export header ({e}); pass a file "
                             "`lessonledger export` wrote") from None
    if header.format != FORMAT:
        raise BadExportError(number, f"export format {header.format}, this version reads "
                             f"format {FORMAT}; import it with the version that wrote it")
    if not _LOG_NAMES.match(header.log_name):
        raise BadExportError(number, f"log name {header.log_name!r} is not one a home holds")
    if not header.envelopes:
        raise BadExportError(number, "the export was written without --include-envelopes, "
                             "so it holds no stored form to replay; export again with it")
    if not header.selection.whole:
        raise BadExportError(number, "a partial export (by principal, project, or from a "
                             "position past 1) has gaps in its chain and cannot be replayed; "
                             "export the whole log with --include-envelopes")
    return header


def _row(number: int, line: bytes, position: int, previous: bytes) -> Row:
    """The line's event, shown to follow ``previous`` and to say what it stores."""
    try:
        stored = _line_decoder.decode(line).stored
    except msgspec.DecodeError as e:
        raise BadExportError(number, f"not an event line ({e})") from None
    if stored is None:
        raise BadExportError(number, "the event has no stored form")
    try:
        envelope = checked_stored(position, previous, stored.envelope, stored.link, stored.body)
    except ReplayMismatchError as e:
        raise BadExportError(number, f"position {position} was due: {e.detail}; the export "
                             "was edited or damaged") from None
    row = Row(envelope, stored)
    _event_of(number, row)
    try:
        readable = _any_decoder.decode(line)
    except msgspec.DecodeError as e:
        raise BadExportError(number, f"not an event line ({e})") from None
    if readable != event_line(row, envelopes=True):
        raise BadExportError(number, f"the readable fields of position {position} differ "
                             "from its stored form; the line was edited")
    return row


def _event_of(number: int, row: Row) -> None:
    """Refuse a catalogue body that is not the event its envelope's type names.

    Its commitment only shows it is what the file's writer stored: a forged body
    (garbage, past the catalogue's bounds, or a lesson under an outcome's envelope,
    which the views would fold as a lesson while erasure and grants go by the
    envelope's type) must still be refused here, before anything is written.
    """
    envelope, payload = row.envelope, row.record.payload
    # Screened as a submission is: an export from a home that took a secret by a path
    # that did not screen it (an older ledger) brings none into this one. An envelope
    # outlives any erasure, so its names are screened whatever its type.
    names = {"actor": envelope.actor, "principal": envelope.principal,
             "session": envelope.session, "scope": envelope.scope,
             "stream": envelope.stream[3:].decode("utf-8", "replace")
             if envelope.stream[:1] == b"\x02" else ""}
    _refuse_credential(number, envelope.position,
                       credential_field(names, path=f"$[{envelope.position}]"))
    if payload is None or envelope.type not in EVENT_TYPES:
        return  # erased, or another application's event: not ours to read
    try:
        event = decode_event(payload)
    except msgspec.DecodeError as e:
        raise BadExportError(number, f"the body at position {envelope.position} does not "
                             f"decode as {envelope.type} ({e}); the export was edited or "
                             "damaged") from None
    if tag_of(type(event)) != envelope.type:
        raise BadExportError(number, f"the body at position {envelope.position} is a "
                             f"{tag_of(type(event))} under an envelope of {envelope.type}; "
                             "the export was forged")
    _refuse_credential(number, envelope.position, credential_field(
        event, skip=event.public_keys, path=f"$[{envelope.position}].event"))


def _refuse_credential(number: int, position: int, found: tuple[str, str] | None) -> None:
    if found is not None:
        raise BadExportError(number, f"position {position} holds what looks like a "
                             f"credential at {found[0]} ({found[1]}); erase it at the "
                             "source and export again")


def _once(number: int, row: Row, keys: set[tuple[bytes, int]]) -> None:
    """Refuse an event whose id or stream version an earlier one of the export took."""
    envelope = row.envelope
    # -2**64 is no stream version (those are 64-bit): an id's key never equals a stream's.
    taken = [(envelope.stream, envelope.version)]
    taken += [(envelope.event_id, -1 << 64)] if envelope.event_id else []
    for key in taken:
        if key in keys:
            raise BadExportError(number, f"position {envelope.position} repeats an earlier "
                                 "event's id or stream version; the export was edited")
        keys.add(key)


def _erased_by(number: int, row: Row) -> list[int]:
    """The positions an ``Erased`` event took: none of them may carry a body."""
    try:
        event = decode_event(row.record.payload or b"")
    except msgspec.DecodeError:
        raise BadExportError(number, f"the erasure at position {row.envelope.position} "
                             "does not decode; the export was edited or damaged") from None
    return event.positions if isinstance(event, Erased) else []


def _checked(path: Path) -> tuple[Header, int]:
    """Read the whole export and check it (see the module's docstring); write nothing.

    Returns the header and the number of events.
    """
    previous: bytes = GENESIS
    position = number = 0
    taken: set[int] = set()
    bodies: set[int] = set()
    missing: set[int] = set()
    # Each event id and stream version once, as the log's indexes require.
    keys: set[tuple[bytes, int]] = set()
    header: Header | None = None
    with path.open("rb") as f, bar("import: check", quiet=False) as shown:
        for number, line in _lines(f):
            if header is None:
                header = _header(number, line)
                shown.update(0, header.last)
                continue
            position += 1
            row = _row(number, line, position, previous)
            previous = row.stored.link
            _once(number, row, keys)
            if row.stored.body is not None:
                bodies.add(position)
                if row.envelope.type == ERASED:
                    taken.update(_erased_by(number, row))
            else:
                missing.add(position)
            shown.advance()
    if header is None:
        raise BadExportError(0, f"{path} is empty; pass a file `lessonledger export` wrote")
    if position != header.last or previous.hex() != header.chain:
        raise BadExportError(number, f"the export ends at position {position}, its header "
                             f"says {header.last}: lines are missing (cut short?) or added")
    resurrected = sorted(bodies & taken)
    if resurrected:
        raise BadExportError(0, f"position {resurrected[0]} carries a body its erasure "
                             "took; an erased body is never brought back")
    # A prefix (--to M) may lack bodies an erasure past M took; a whole log may not:
    # its new home would not verify.
    unexplained = sorted(missing - taken) if header.last == header.head else []
    if unexplained:
        raise BadExportError(0, f"position {unexplained[0]} has no body and no erasure in "
                             "the export names it (damaged, or a partial replica's export, "
                             "which withholds bodies); export from a home holding them")
    return header, position


def _check_target(target: Path) -> None:
    check_home_file(target)
    if is_home(target) or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        msg = (f"{target} is not a new or empty directory; an import makes a new home, "
               "never adds to one: pass a path that does not exist yet; nothing was written")
        raise ImportTargetError(msg)


#: Records checked and put per call inside the import's one transaction: bounds what
#: is held in memory, not what commits (the whole import commits at once).
_IMPORT_BATCH = 4096


def _restore(path: Path, target: Path, header: Header, events: int) -> tuple[int, int]:
    """Write the checked export into a new home and fold its views; (head, lessons)."""
    with open_log(target, create=True, name=header.log_name) as log:
        with open(path, "rb") as f, bar("import: write", events) as shown, \
                log.writing() as writing:
            link: bytes = GENESIS
            rows: list[tuple[bytes, bytes | None]] = []
            links: list[bytes] = []
            for number, line in _lines(f):
                if number > 1:
                    stored = _line_decoder.decode(line).stored
                    assert stored is not None, "checked before"
                    rows.append((stored.envelope, stored.body))
                    links.append(stored.link)
                    link = stored.link
                    shown.advance()
                    if len(rows) == _IMPORT_BATCH:
                        writing.import_records(rows, links=links)
                        rows, links = [], []
            writing.import_records(rows, links=links)
            if writing.appended != events or link.hex() != header.chain:
                # Raised inside the block: the transaction commits nothing.
                raise BadExportError(0, f"{path} changed while it was imported; import "
                                     "it again once nothing writes to it")
        lessons = 0
        if header.log_name == LOG_NAME:
            runner = Runner(registry(), ViewStore(log.home))
            # Folded from position 0 as `rebuild` does, and saved: the first query has
            # nothing left to fold.
            with bar("import: views", events) as shown:
                runner.views.update(runner.fresh(log, None, progress=shown.update))
            runner.save()
            lessons = len(lesson_view(runner).lessons)
        return log.head(), lessons


#: The directory an import builds its home in, beside the target, until it is whole.
_ASIDE = ".{name}.importing-{pid}"


def _aside(target: Path) -> Path:
    """A fresh directory beside ``target`` to build the import in.

    A home is several files written over minutes; built in place, an import killed
    half-way (SIGKILL, a power cut) left a target that opened as an empty home and that
    a second import refused as not new. Built aside and renamed when complete, the
    target is either absent or whole. What killed imports left aside (their process is
    gone) is removed here, so a rerun starts clean.
    """
    parent = target.absolute().parent
    parent.mkdir(parents=True, exist_ok=True)
    for old in parent.glob(_ASIDE.format(name=target.name, pid="*")):
        pid = old.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    aside = parent / _ASIDE.format(name=target.name, pid=os.getpid())
    shutil.rmtree(aside, ignore_errors=True)
    return aside


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and its directory is not ours
    return True


def _move_into_place(aside: Path, target: Path) -> None:
    """Rename the complete home onto ``target`` (absent, or an empty directory), durably."""
    os.rename(aside, target)  # POSIX: replaces an empty directory atomically
    folder = os.open(target.absolute().parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a power cut
    finally:
        os.close(folder)


def _cmd_import(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise BadExportError(0, f"no export file at {args.file}; check the path")
    _check_target(args.into)
    header, events = _checked(args.file)
    if args.expect_chain is not None and header.chain != args.expect_chain.lower():
        # The chain was checked line by line to end at the header's link: a file that
        # ends elsewhere is not the history the operator pinned (rewritten, or another).
        raise BadExportError(0, (
            f"{args.file} ends at chain link {header.chain or '(empty log)'}, not the "
            f"expected {args.expect_chain}; it is not the history `verify` showed at the "
            "source"))
    aside = _aside(args.into)
    try:
        head, lessons = _restore(args.file, aside, header, events)
        _check_target(args.into)  # made by someone else meanwhile: theirs, not ours
        _move_into_place(aside, args.into)
    except BaseException:
        # The target was never touched; what was built aside goes.
        shutil.rmtree(aside, ignore_errors=True)
        raise
    whole = header.last == header.head
    result = {"into": str(args.into), "events": events, "head": head, "lessons": lessons,
              "whole": whole, "source_head": header.head}
    if args.json:
        print_json(result)
        return 0
    echo(f"imported {events:,} events into {args.into}: {lessons:,} lessons")
    if not whole:
        echo(f"partial: positions 1 to {header.last:,} of a log whose head was "
             f"{header.head:,}; the views are the source's as of position {header.last:,}")
    return 0


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add export and import to the CLI's sub-parsers."""
    export = sub.add_parser("export", help=(
        "write events as JSON lines, one each: the whole log, a principal's (a "
        "subject-access export), a project's, or a range"))
    which = export.add_mutually_exclusive_group()
    which.add_argument("--principal", metavar="P", type=nonblank, help=(
        "every event naming P: as its envelope's principal or actor, or in its body (an "
        "erasure of P, a delta P approved); nothing else"))
    which.add_argument("--project", metavar="P", type=nonblank,
                       help="every event of project digest P")
    export.add_argument("--from", dest="start", type=count_option(1), metavar="N",
                        help="first position (default 1)")
    export.add_argument("--to", dest="stop", type=count_option(1), metavar="M",
                        help="last position (default: the head)")
    export.add_argument("--include-envelopes", action="store_true", help=(
        "add each event's stored form (envelope, chain link, salted body; base64), which "
        "`import` needs to replay it verbatim"))
    export.add_argument("--output", "-o", type=Path, metavar="FILE",
                        help="write to FILE (default: standard output)")
    export.add_argument("--log", metavar="NAME", default=None,
                        help="the log to export, when the home holds several")
    add_read_only(export)
    export.set_defaults(run=_cmd_export)
    into = sub.add_parser("import", help=(
        "replay a whole export (written with --include-envelopes) into a new home"))
    into.add_argument("file", type=Path, help="the export file")
    into.add_argument("--into", type=Path, required=True, metavar="NEW_HOME",
                      help="the new home: a path that does not exist yet, or an empty directory")
    into.add_argument("--expect-chain", metavar="HEX", type=_chain_link, default=None,
                      help=(
        "refuse the file unless its history ends at this chain link (the `chain head` "
        "that `lessonledger verify` prints at the source): a file whose whole chain was "
        "rewritten verifies on its own, but cannot end at the pinned link"))
    into.add_argument("--json", action="store_true", help="print the result as JSON")
    into.set_defaults(run=_cmd_import)


def _chain_link(text: str) -> str:
    if len(text) != 64 or any(c not in "0123456789abcdefABCDEF" for c in text):
        msg = f"{text!r} is not a chain link: give the 64 hex digits `verify` prints"
        raise argparse.ArgumentTypeError(msg)
    return text.lower()
