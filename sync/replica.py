"""A replica's side of sync: clone, pull (verify, import, fold, erase, compact, ack), push.

A replica's log grows only by records pulled from its hub, appended verbatim
(:meth:`~lessonledger.ledger.log.Writing.import_records`), so its chain links, segment
ids and snapshot ids are the hub's byte for byte. Every object is checked on arrival,
before anything is written: each closed segment against the id the hub listed (those
ids against the hub's Merkle root), the open one and the chain against the hub's head
link, each body against its envelope's commitment. What fails is refused with its hash
named (:class:`~lessonledger.sync.errors.TamperedObjectError`), and nothing of that
chunk is written.

Checked chunks are committed in batches of about :data:`BATCH_BYTES`, one transaction
each, with what they imply: the bodies an ``Erased`` record in them names are deleted,
and the erasure is marked pending acknowledgement. So a pull killed at any moment
continues, when run again, from the last batch committed. Each batch is folded into the
views through the runner as it commits (never a policy: the hub decided everything
already), from the records already decoded on their way in; at the end the vector index
follows and both are saved (a pull with ``fold=False``, as ``clone --fold background``
runs it, folds none of it unless an erasure came: it returns once everything is
verified and committed, and a reader folds what the saved views lack until
:func:`refold` saves them). Such a pull stores each whole checked chunk as one value, a
pack (:mod:`lessonledger.ledger.packs`), instead of four rows an event: the first
writable open of the home after it (the background fold) lays the packs out as the
log's rows, so no reader sees the log without them. A chunk with an ``Erased`` record, a
body gap or a withheld body is never packed: from there on the pull writes rows, after
laying out what it packed. If erasures were applied, the home is then compacted so
none of their bytes stays in its files, and only then is each erasure acknowledged to
the hub.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from hashlib import sha256
from operator import itemgetter, methodcaller
from pathlib import Path
from typing import NamedTuple

import msgspec
from lessonledger.commands.errors import BatchRefusedError, CommandError, InvalidCommandError
from lessonledger.commands.handlers import command_id
from lessonledger.commands.messages import checked_command, decode_command
from lessonledger.commands.recall import Recaller
from lessonledger.commands.refusals import refuse_credentials, refuse_query
from lessonledger.ledger.compaction import compact
from lessonledger.ledger.envelope import ROLE_ACTORS, SALT_BYTES, decode_envelope
from lessonledger.ledger.errors import HomeBusyError, LedgerConfigError, ReplayMismatchError
from lessonledger.ledger.events import ERASED, NAMES_A_KEY, Erased, decode_event
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.lmdb_env import LMDBHome, acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog, Record, Writing
from lessonledger.ledger.objects import (
    SEGMENT_SIZE,
    SegmentHasher,
    join_envelopes,
    merkle_root,
    segment_of,
)
from lessonledger.ledger.packs import Pack, put_packs, unpack
from lessonledger.projections.runner import Runner, Scannable
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import OBJECTS, lesson_view, object_view, registry
from lessonledger.sync.endpoints import check_hub_address
from lessonledger.sync.errors import (
    DivergedError,
    NotAReplicaError,
    ProtocolError,
    RefusedError,
    TamperedObjectError,
)
from lessonledger.sync.exchange import DEFAULT_CREDIT, Exchange
from lessonledger.sync.protocol import (
    MAX_FETCH_SEGMENTS,
    Ack,
    Acked,
    Chunk,
    Fetch,
    FetchMany,
    Hello,
    Ids,
    Push,
    Pushed,
    PushResult,
    Refs,
    Refused,
    Reply,
    SegmentIds,
    decode_reply,
    encode,
)
from lessonledger.sync.refill import DUE, refill
from lessonledger.sync.state import (
    Outboxed,
    ReplicaInfo,
    SyncState,
    drop_torn_marker,
    read_marker,
    write_marker,
)
from lessonledger.sync.wire import MAX_BATCH_COMMANDS, MAX_FRAME_BYTES

__all__ = [
    "PullResult",
    "PushOutcome",
    "check_hub_address",
    "fold_views",
    "prepare_clone",
    "pull",
    "push",
    "queue_commands",
    "refold",
    "replica_info",
]

_LOG_MARKER = "LESSONLEDGER"


class PullResult(msgspec.Struct):
    """What a pull did.

    Attributes:
        head: the replica's last position after it.
        fetched: records appended.
        bodies: bodies received.
        withheld: bodies the hub did not send (the key may not read them).
        erasures: erasures applied and acknowledged.
        pending: erasures applied whose acknowledgement waits (compaction could not
            run: another process has the home open).
        received: bytes received; sent: bytes sent.
        seconds: how long it took.
        fold_seconds: of which folding the views and the index.
    """

    head: int = 0
    fetched: int = 0
    bodies: int = 0
    withheld: int = 0
    erasures: list[int] = []
    pending: list[int] = []
    received: int = 0
    sent: int = 0
    seconds: float = 0.0
    fold_seconds: float = 0.0


class PushOutcome(msgspec.Struct):
    """What a push did: each command's answer, then the pull that brought them back."""

    results: list[PushResult]
    pull: PullResult


def replica_info(home: str | os.PathLike[str]) -> ReplicaInfo:
    """The hub and name of the replica at ``home``.

    Raises:
        NotAReplicaError: ``home`` was not cloned.
    """
    info = read_marker(home)
    if info is None:
        msg = (f"{home} is not a replica (it was not cloned from a hub); run "
               "`lessonledger clone tcp://HOST:PORT DIR` first")
        raise NotAReplicaError(msg)
    return info


def prepare_clone(hub: str, directory: str | os.PathLike[str], name: str, *,
                  key: str = "", hub_key: str = "") -> None:
    """Make ``directory`` an empty replica of ``hub``, or accept it as one already.

    A clone run again into its directory continues where it stopped.

    Raises:
        LedgerConfigError: ``directory`` holds something else (another hub's replica,
            a home, other files).
        ReplicaMarkerError: it is a replica whose marker is damaged.
        CredentialError: ``name`` looks like a credential.
    """
    refuse_query(name=name)  # the hub records it with every erasure it acknowledges
    path = Path(directory)
    drop_torn_marker(path)  # a clone killed writing its marker: start afresh
    info = read_marker(path)
    if info is not None:
        if info.hub != hub:
            msg = (f"{path} is a replica of {info.hub}, not of {hub}; clone into another "
                   "directory")
            raise LedgerConfigError(msg)
        return
    if path.exists() and any(path.iterdir()):
        msg = f"{path} is not empty; clone into a new or empty directory"
        raise LedgerConfigError(msg)
    path.mkdir(parents=True, exist_ok=True)
    write_marker(path, ReplicaInfo(hub=hub, name=name, key=key, hub_key=hub_key))
    (path / _LOG_MARKER).write_text("lessonledger home: LMDB files, do not edit by hand\n")


def _reply(frame: bytes, kind: type[Reply]) -> Reply:
    reply = decode_reply(frame)
    if isinstance(reply, Refused):
        if reply.code == "diverged":
            raise DivergedError(reply.message)
        msg = f"the hub refused: {reply.message}"
        raise RefusedError(msg)
    if not isinstance(reply, kind):
        msg = f"expected {kind.__name__}, the hub sent {type(reply).__name__}"
        raise ProtocolError(msg)
    return reply


#: An ``Erased`` record's type as its envelope spells it: a chunk holding one is never
#: packed (it may hold bytes that spell it elsewhere: that chunk goes in rows, as all do).
_ERASED_TYPE = msgspec.msgpack.encode(ERASED)
#: The types of grants and revocations, as spelled there: a pull that resumes a replica
#: records what such an event makes due (bodies its key was not sent before), which a
#: pack would skip, so a chunk holding one goes in rows then.
_KEY_TYPES = [msgspec.msgpack.encode(tag) for tag in sorted(NAMES_A_KEY)]
#: How a canonical envelope's last field, the 32-byte commitment, begins (``bin 8``, 32).
_COMMITMENT = b"\xc4\x20"
_COMMITMENT_MARK = itemgetter(slice(-34, -32))
_COMMITMENT_OF = itemgetter(slice(-32, None))
_DIGEST = methodcaller("digest")

#: Verified chunks are committed together once they hold this many bytes (and when the
#: pull reaches the hub's head): one transaction and one fold for many segments, instead
#: of one per segment. An interrupted pull loses at most this much of what arrived.
BATCH_BYTES = 4 << 20


class _Queued(NamedTuple):
    """A chunk checked and waiting to be committed with the others of its batch.

    ``checked``: its segment hashed to the id the hub listed (the chunk closes the
    segment, or reaches the head), so its envelopes are the hub's bytes.
    """

    start: int
    records: int
    #: The records as the log's rows; none for a pack, which holds them.
    rows: list[tuple[bytes, bytes | None]]
    withheld: list[int]
    checked: bool
    bodies: int  # how many rows carry one
    erased: list[int]
    #: The chunk checked whole and stored as one value (see :meth:`_Puller._packed`).
    pack: Pack | None = None


class _Misfit(Exception):
    """A queued chunk did not fit the log: ``done`` chunks before it did."""

    def __init__(self, done: int, error: TamperedObjectError) -> None:
        super().__init__(str(error))
        self.done, self.error = done, error


class _Landed:
    """The records a batch just committed, read back from memory rather than the log.

    The runner folds them from here: they were decoded on their way in, so the fold
    does not read and decode them again. A scan from before them reads the log.
    """

    def __init__(self, records: list[Record], log: EventLog) -> None:
        self.records, self.log = records, log
        self.first = records[0].envelope.position if records else 1

    def scan(self, start: int = 1) -> Iterator[Record]:
        if start < self.first:
            return self.log.scan(start)
        return iter(self.records[start - self.first:])


class _Puller:
    """One pull's state: what the replica has, and what the hub said it has."""

    def __init__(self, home: LMDBHome, name: str, *, fold: bool = True,
                 per_fetch: int = 1) -> None:
        self.home, self.name = home, name
        #: Segments one request asks for (a ``FetchMany`` when more than one).
        self.per_fetch = min(per_fetch, MAX_FETCH_SEGMENTS)
        self.replies_to: dict[bytes, int] = {}
        self.log = EventLog(home, LOG_NAME)
        self.state = SyncState(home)
        #: Whether the views are folded as batches commit; without, only the object
        #: view (what a pull continues from) is kept, and the views wait for a fold.
        self.folds = fold
        self.erased = False
        self.runner = Runner(registry() if fold else [
            r for r in registry() if r.name == OBJECTS], ViewStore(home))
        self.fold_seconds = 0.0
        # What an interrupted pull committed but did not fold; without folding, the
        # object view alone, part of what the pull continues from (not timed as a fold).
        if fold:
            self._fold(self.log)
        else:
            self.runner.fold(self.log)
        view = object_view(self.runner)
        self.head, self.link = view.position, view.link
        self.closed = view.closed_ids
        self.hasher = SegmentHasher()
        for stored in view.open_envelopes:
            self.hasher.add(stored)
        self.tombstones = set(view.tombstones)
        #: Where this pull starts: bodies withheld up to here were withheld under the
        #: grant before any this pull brings (a clone's are under its current one).
        self.started_at = self.head
        self.refs: Refs | None = None
        self.ids: list[bytes] = []
        self.asked: dict[int, int] = {}  # start → stop of each fetch in flight
        self.early: dict[int, Chunk] = {}  # chunks that came before the one awaited
        self.queued: list[_Queued] = []
        self.queued_bytes = 0
        self.result = PullResult()
        #: Bodies a later erasure took were deleted here (see :meth:`_forget`), or
        #: withheld ones came (:func:`~lessonledger.sync.refill.refill`): the views
        #: are folded afresh.
        self.forgot = False
        #: Positions that came without a body the hub said was withheld or erased
        #: later: taken by an erasure, in this pull or one committed at the hub since
        #: its hello (then the next pull brings it).
        self.missing: set[int] = set()
        #: Whether whole chunks are stored as packs (a pull that does not fold).
        self.packing = not fold
        self.packed = False

    def hello(self) -> bytes:
        return encode(Hello(self.name, self.head, self.link if self.head else b""))

    def on_refs(self, refs: Refs) -> bytes:
        self.refs = refs
        self._forget([p for p in refs.erased if p <= self.head])
        return encode(SegmentIds(len(self.closed), refs.head))

    def _forget(self, erased: list[int]) -> None:
        """Delete the bodies the hub says a later erasure took, which this replica holds.

        The hub is a checkout of a snapshot older than that erasure, so no ``Erased``
        record will come: the views are folded afresh without the bodies, and the pull
        ends with a compaction, as for an erasure.
        """
        if not erased:
            return
        with self.log.writing() as writing:
            gone = writing.erase_bodies(erased)
            self.state.remove_positions(writing.transaction, "withheld", erased)
            self.state.add_positions(writing.transaction, "erased_later", erased)
            if gone:  # their bytes stay in free pages until a compaction: it is due
                self.state.add_positions(writing.transaction, "unswept", erased)
        if gone:
            self.refold()

    def refold(self) -> None:
        """Bodies went or came outside the order of the log: fold the views afresh."""
        self.forgot = True
        started = time.perf_counter()
        self.runner.rebuild(self.log)
        self.fold_seconds += time.perf_counter() - started

    def on_ids(self, ids: Ids) -> list[bytes]:
        assert self.refs is not None
        if ids.start != len(self.closed) or len(self.closed) + len(ids.ids) != self.refs.segments \
                or merkle_root(self.closed + ids.ids) != self.refs.root:
            raise TamperedObjectError(kind="root", address=self.refs.root,
                                      detail="the segment ids listed do not hash to the hub's root")
        self.ids = ids.ids
        ranges = []
        start = self.head + 1
        while start <= self.refs.head:
            stop = min((segment_of(start) + 1) * SEGMENT_SIZE, self.refs.head)
            ranges.append((start, stop))
            start = stop + 1
        if self.per_fetch <= 1:
            return [self._ask(start, stop) for start, stop in ranges]
        fetches = []
        for at in range(0, len(ranges), self.per_fetch):
            group = ranges[at:at + self.per_fetch]
            for start, stop in group:
                self.asked[start] = stop
            frame = encode(FetchMany(group[0][0], group[-1][1]))
            self.replies_to[frame] = len(group)
            fetches.append(frame)
        return fetches

    def replies(self, frame: bytes) -> int:
        """How many chunks a request asked for: one per segment."""
        return self.replies_to.get(frame, 1)

    def _ask(self, start: int, stop: int) -> bytes:
        self.asked[start] = stop
        return encode(Fetch(start, stop))

    def on_chunk(self, frame: bytes) -> list[bytes]:
        chunk = _reply(frame, Chunk)
        assert isinstance(chunk, Chunk)
        self.early[chunk.start] = chunk
        more = []
        while self.head + 1 in self.early:
            more += self._apply(self.early.pop(self.head + 1))
        return more

    def _id_of(self, segment: int) -> bytes:
        return self.ids[segment - len(self.closed)]

    def _apply(self, chunk: Chunk) -> list[bytes]:
        assert self.refs is not None
        stop = self.asked.pop(chunk.start, None)
        envelopes = chunk.envelopes
        count = len(envelopes)
        if stop is None or not count or count > stop - chunk.start + 1 \
                or len(chunk.bodies) != count:
            msg = f"the hub sent a chunk at {chunk.start} that was not asked for"
            raise ProtocolError(msg)
        last = chunk.start + count - 1
        # The run first, against its segment's id, hashed as one piece (a chunk never
        # crosses a segment's end): an altered envelope is named as the segment it is in,
        # before any envelope is decoded or body read.
        hasher = self.hasher.copy()
        run = join_envelopes(envelopes)
        hasher.add_run(run, count)
        closes = last % SEGMENT_SIZE == 0
        checked = closes or last == self.refs.head
        if checked:
            expected = self._id_of(segment_of(last))
            if hasher.digest() != expected:
                first = segment_of(last) * SEGMENT_SIZE + 1
                raise TamperedObjectError(kind="segment", address=expected, detail=(
                    f"positions {first}-{last} hash otherwise"))
        if closes:
            hasher = SegmentHasher()
        bodies = chunk.bodies
        empty = bodies.count(b"")
        # A body is b"" where none came: looked at in place, the rows are made below only
        # for a chunk that is not packed.
        refused = [p for p in self.tombstones.intersection(range(chunk.start, last + 1))
                   if bodies[p - chunk.start]]
        if refused:
            raise TamperedObjectError(kind="body", address=b"", detail=(
                f"the body at position {refused[0]} was erased; it is not accepted back"))
        sent_anyway = [p for p in chunk.withheld + chunk.erased
                       if not chunk.start <= p <= last or bodies[p - chunk.start]]
        if sent_anyway:
            msg = (f"the hub sent a chunk at {chunk.start} naming position {sent_anyway[0]} "
                   "withheld or erased, which is not a position of it without a body")
            raise ProtocolError(msg)
        if empty:
            self.missing.update({p for p in range(chunk.start, last + 1)
                                 if not bodies[p - chunk.start]}
                                - set(chunk.withheld) - set(chunk.erased))
        pack = self._packed(chunk, run, checked and not empty)
        rows: list[tuple[bytes, bytes | None]] = [] if pack is not None else list(zip(
            envelopes, [body or None for body in bodies] if empty else bodies, strict=True))
        self.queued.append(_Queued(chunk.start, count, rows, chunk.withheld, checked,
                                   count - empty, chunk.erased, pack))
        self.queued_bytes += len(run) + sum(map(len, bodies))
        self.head, self.hasher = last, hasher
        if checked and (last == self.refs.head or self.queued_bytes >= BATCH_BYTES):
            self.flush()
        return [self._ask(last + 1, stop)] if last < stop else []

    def _packed(self, chunk: Chunk, run: bytes, whole: bool) -> Pack | None:
        """The chunk as a pack, checked, or None: it goes in rows (and so does the rest).

        A pack is a chunk whose run hashed to its segment's id (``whole``: it closes its
        segment or reaches the head) with every body, no ``Erased`` record and nothing
        the hub withheld, so nothing of it waits for another object or touches the
        replica's state. Each body is checked against the commitment its envelope ends
        with (its canonical form: a 32-byte ``bin 8``). The chain is not recomputed
        here: the envelopes are the hub's (their segment ids hash to its root), so their
        links follow from them, and :func:`~lessonledger.ledger.packs.unpack` computes
        them as it lays the rows out, once, checking the link after the pull's last
        pack against the hub's head link, which that pack holds.
        """
        assert self.refs is not None
        envelopes = chunk.envelopes
        if self.packing and not (whole and _ERASED_TYPE not in run
                                 and not (self.started_at
                                          and any(t in run for t in _KEY_TYPES))
                                 and not chunk.withheld and not chunk.erased
                                 and set(map(_COMMITMENT_MARK, envelopes)) == {_COMMITMENT}):
            # From here on in rows: what was packed is laid out first, behind it.
            self.flush()
            unpack(self.home)
            self.packing = False
        if not self.packing:
            return None
        # Every body hashed and compared in C (map, then one list comparison): this is a
        # clone's work per event, and a Python loop doubled it.
        commitments = list(map(_COMMITMENT_OF, envelopes))
        if list(map(_DIGEST, map(sha256, chunk.bodies))) != commitments:
            for position, (commitment, body) in enumerate(zip(commitments, chunk.bodies,
                                                              strict=True), chunk.start):
                if sha256(body).digest() != commitment:
                    raise TamperedObjectError(kind="body", address=commitment, detail=(
                        f"the body at position {position} hashes otherwise"))
        last = chunk.start + len(envelopes) - 1
        return Pack(chunk.start, run, chunk.bodies,
                    self.refs.link if last == self.refs.head else b"")

    def flush(self) -> None:
        """Commit the queued chunks in one transaction, then fold them into the views.

        A chunk that does not fit is refused with its object named, and nothing of it
        is written; the chunks queued before it are committed, so a new pull continues
        after them. Chunks behind the last checked one stay queued (a segment cut short
        by the body budget, its end not here yet): their envelopes are the hub's only
        once their segment hashes to its id, so none is written before, not even when
        the pull fails.
        """
        done = max((i + 1 for i, queued in enumerate(self.queued) if queued.checked),
                   default=0)
        batch, self.queued = self.queued[:done], self.queued[done:]
        if not self.queued:
            self.queued_bytes = 0
        if not batch:
            return
        try:
            self._commit(batch)
        except _Misfit as misfit:
            if misfit.done:
                self._commit(batch[:misfit.done])
            raise misfit.error from None

    def _commit(self, batch: list[_Queued]) -> None:
        # Everything below is checked inside the transaction before it commits: a misfit
        # raises out of the block, which then writes nothing of the batch.
        assert self.refs is not None
        records: list[Record] = []
        bodies = withheld = fetched = 0
        erased = False
        if batch[0].pack is not None:  # a batch is all packs or all rows (see _packed)
            put_packs(self.home, [queued.pack for queued in batch
                                  if queued.pack is not None])
            self.packed = True
            self.result.fetched += sum(queued.records for queued in batch)
            self.result.bodies += sum(queued.bodies for queued in batch)
            return
        with self.log.writing() as writing:
            txn = writing.transaction
            for done, queued in enumerate(batch):
                try:
                    envelopes = writing.import_records(queued.rows,
                                                       envelopes_checked=queued.checked)
                except ReplayMismatchError as e:
                    raise _Misfit(done, self._tampered(
                        e, queued.rows[e.position - queued.start])) from None
                last = queued.start + queued.records - 1
                if last == self.refs.head and writing.link != self.refs.link:
                    raise _Misfit(done, TamperedObjectError(
                        kind="chain", address=self.refs.link,
                        detail=f"the chain link at position {last} differs"))
                if queued.withheld:
                    self.state.add_positions(txn, "withheld", queued.withheld)
                if queued.erased:
                    # Taken at the hub by an erasure its log does not hold (the hub is a
                    # checkout of a snapshot older than that erasure): verify calls it so.
                    self.state.add_positions(txn, "erased_later", queued.erased)
                withheld += len(queued.withheld)
                fetched += len(envelopes)
                bodies += queued.bodies
                if self.started_at and any(
                        e.type in NAMES_A_KEY and body is not None
                        for e, (_, body) in zip(envelopes, queued.rows, strict=True)):
                    # This key's grant changed: what it was not sent may come now.
                    self.state.add_positions(txn, DUE, [self.started_at])
                for offset in [i for i, e in enumerate(envelopes) if e.type == ERASED]:
                    body = queued.rows[offset][1]
                    if body is not None:
                        self._erase(writing, envelopes[offset].position, body)
                        erased = True
                if self.folds:
                    records += [Record(envelope, body[SALT_BYTES:] if body is not None
                                       else None)
                                for envelope, (_, body) in zip(envelopes, queued.rows,
                                                               strict=True)]
            link = writing.link
        self.link = link
        self.result.fetched += fetched
        self.result.bodies += bodies
        self.result.withheld += withheld
        self.erased = self.erased or erased
        if self.folds:
            # A batch with an erasure is folded from the log, where its bodies are gone.
            self._fold(self.log if erased else _Landed(records, self.log))

    def _fold(self, source: Scannable) -> None:
        started = time.perf_counter()
        self.runner.fold(source)
        self.fold_seconds += time.perf_counter() - started

    def finish(self) -> int:
        """Bring the vector index up to the views, save both; the position reached.

        Without folding, only an erasure makes it fold here: what the saved views hold
        of the erased bodies goes before the erasure is acknowledged. Otherwise the log's
        head is reached, and the views wait for :func:`refold` (or any reader, which
        folds what its views lack).
        """
        started = time.perf_counter()
        if self.folds:
            _save_folded(self.home, self.log, self.runner, fresh=self.forgot)
            self.fold_seconds += time.perf_counter() - started
            return self.runner.position
        if self.erased or self.forgot:
            # Saved views of an earlier pull may hold what the bodies it forgot fed:
            # made afresh, as the index is.
            fold_views(self.home, fresh=self.forgot)
            self.fold_seconds += time.perf_counter() - started
        self.runner.save()  # the object view only: where the next pull starts
        if self.packed and self.home.users > 1:
            # Something else in this process has the home open and opens it no more:
            # it would read the log without what the packs hold.
            unpack(self.home)
        return self.head if self.packed else self.log.head()

    def _tampered(self, error: ReplayMismatchError,
                  row: tuple[bytes, bytes | None]) -> TamperedObjectError:
        """What a record that does not fit is, named by the object it came in."""
        stored, body = row
        try:
            envelope = decode_envelope(stored)
        except msgspec.DecodeError:
            envelope = None
        if envelope is not None and body is not None \
                and sha256(body).digest() != envelope.commitment:
            return TamperedObjectError(kind="body", address=envelope.commitment, detail=(
                f"the body at position {error.position} hashes otherwise"))
        return TamperedObjectError(kind="segment", address=b"", detail=(
            f"position {error.position} does not fit: {error.detail}"))

    def _erase(self, writing: Writing, position: int, body: bytes) -> None:
        """Apply a pulled ``Erased`` in the chunk's transaction: bodies gone, ack pending."""
        erased = decode_event(body[SALT_BYTES:])
        if not isinstance(erased, Erased):
            return
        txn = writing.transaction
        named = [p for p in erased.positions if p < position]
        writing.erase_bodies(named)
        self.tombstones.update(named)
        self.state.remove_positions(txn, "withheld", named)
        self.state.add_positions(txn, "pending", [position])
        # A queued command holding what was erased goes too, else the acknowledgement
        # below says the replica holds none of it while its outbox does.
        bound = self.refs.principal if self.refs is not None else ""
        self.state.drop(txn, [key for key, queued in self.state.outbox(txn)
                              if _names(queued.command, erased.what, erased.subject, bound)])


def _names(command: bytes, what: str, subject: str, bound: str = "") -> bool:
    """True when a queued command's JSON is of what an erasure of ``what`` took.

    Of a principal or a session: the command is theirs. ``bound`` is whose the hub
    writes this replica's commands as (``Refs.principal``): a command naming no
    principal, or another (rebound to the key's), is then its. Of an outcome or a
    lesson: the command names it, or is the one that made it (the hub derives the ids
    of what a command makes from its key and principal, so a push whose answer was lost
    and that the hub wrote is found).
    """
    try:
        fields = msgspec.json.decode(command)
    except msgspec.DecodeError:
        return False
    if not isinstance(fields, dict):
        return False
    if what == "principal" and bound:
        return bound == subject  # the hub writes its actor as the key's principal too
    if what == "principal" and subject not in ROLE_ACTORS and fields.get("actor") == subject:
        return True  # what it wrote as actor is the principal's too
    if what in ("outcome", "lesson"):
        key, principal = fields.get("key"), bound or fields.get("principal", "")
        made = (str(derived_id(command_id(key, principal), what))
                if isinstance(key, str) and isinstance(principal, str) else None)
        return subject in (made, fields.get(f"{what}_id"))
    return bool(fields.get(what) == subject)


def fold_views(home: LMDBHome, *, fresh: bool = False) -> int:
    """Fold the pulled records into every view and the vector index, and save them.

    Through the runner, without reacting: the hub's policies decided everything, and
    what they decided is in the records. After an erasure the views are folded afresh
    (the runner does that) and the index is built afresh, so neither keeps anything
    derived from the erased bodies; ``fresh`` does the same for bodies deleted with no
    erasure record to fold (a restored hub's later erasures). Returns the position
    reached.
    """
    log = EventLog(home, LOG_NAME)
    runner = Runner(registry(), ViewStore(home))
    if fresh:
        runner.rebuild(log)
    else:
        runner.fold(log)
    _save_folded(home, log, runner, fresh=fresh)
    return runner.position


def _save_folded(home: LMDBHome, log: EventLog, runner: Runner, *,
                 fresh: bool = False) -> None:
    """The vector index brought up to ``runner``'s lesson view; both saved.

    After an erasure the runner folded (it refolds its views afresh), or with ``fresh``,
    the index is built afresh too, so neither keeps anything derived from the erased
    bodies.
    """
    recaller = Recaller(Path(home.path) / "vectors", log, lesson_view(runner),
                        fresh=fresh or runner.erasures > 0)
    recaller.sync()
    runner.save()
    recaller.save()


def refold(directory: str | os.PathLike[str]) -> int:
    """Fold a replica's views and index to its head and save them (as a pull ends)."""
    home = acquire(os.fspath(directory), sync=True)
    try:
        return fold_views(home)
    finally:
        release(home)


def pull(directory: str | os.PathLike[str], exchange: Exchange, *,
         credit: int = DEFAULT_CREDIT, sync: bool = True,
         progress: Callable[[int, int], None] | None = None,
         fold: bool = True, again: bool = True) -> PullResult:
    """Bring the replica at ``directory`` up to its hub; see the module docstring.

    A pull is of the hub's log up to the head its hello was answered with. A body an
    erasure committed since then took comes without the ``Erased`` record that explains
    it (that is past the head): the pull then runs ``again`` once, to apply it, so the
    replica never ends a pull holding a body gap no record names.

    With ``fold`` False the views and the index are not folded (unless an erasure came:
    what they hold of it goes first): the pull returns once every object is verified and
    committed, and :func:`refold` (``lessonledger fold``) folds them later. Meanwhile a
    query on the replica folds what its views lack itself, so it answers exactly as
    after a folding pull, only slower.

    Raises:
        NotAReplicaError: the home was not cloned.
        DivergedError: its log is not a prefix of the hub's.
        TamperedObjectError: an object did not hash to its address (nothing of it
            was written; what came before it stays, and a new pull continues).
        RefusedError, ProtocolError: the hub refused, or sent something else.
    """
    info = replica_info(directory)
    started = time.perf_counter()
    home = acquire(os.fspath(directory), sync=sync)
    try:
        puller = _Puller(home, info.name, fold=fold, per_fetch=exchange.fetch_segments)
        refs = _reply(exchange.call(puller.hello()), Refs)
        assert isinstance(refs, Refs)
        ids = _reply(exchange.call(puller.on_refs(refs)), Ids)
        assert isinstance(ids, Ids)

        def on_reply(frame: bytes) -> list[bytes]:
            more = puller.on_chunk(frame)
            if progress is not None:
                progress(puller.head, refs.head)
            return more

        try:
            exchange.pipeline(puller.on_ids(ids), on_reply, credit, puller.replies)
        finally:
            # What arrived and checked out before a failure is kept: a new pull
            # continues after it.
            puller.flush()
        def fetch(request: Fetch) -> Chunk:
            chunk = _reply(exchange.call(encode(request)), Chunk)
            assert isinstance(chunk, Chunk)
            return chunk

        if refill(home, fetch, puller.tombstones):
            puller.refold()
        result = puller.result
        result.head = puller.finish()
        result.fold_seconds = puller.fold_seconds
        unexplained = bool(puller.missing - puller.tombstones)
        with home.env.begin() as txn:
            pending = SyncState(home).positions(txn, "pending")
            unswept = SyncState(home).positions(txn, "unswept")
    finally:
        release(home)
    if pending or unswept:
        try:
            compact(os.fspath(directory))
        except HomeBusyError:  # the compaction, and what waits for it, wait for a pull
            result.pending = pending
            pending, unswept = [], []
        _swept(directory, unswept, sync)
    for erasure in pending:
        _reply(exchange.call(encode(Ack(info.name, erasure))), Acked)
        _done_with(directory, erasure, sync)
        result.erasures.append(erasure)
    result.received, result.sent = exchange.received, exchange.sent
    result.seconds = time.perf_counter() - started
    if unexplained and again:
        more = pull(directory, exchange, credit=credit, sync=sync, progress=progress,
                    fold=fold, again=False)
        return PullResult(
            more.head, result.fetched + more.fetched, result.bodies + more.bodies,
            result.withheld + more.withheld, result.erasures + more.erasures, more.pending,
            more.received, more.sent, time.perf_counter() - started,
            result.fold_seconds + more.fold_seconds)
    return result


def _swept(directory: str | os.PathLike[str], positions: list[int], sync: bool) -> None:
    """Record that a compaction took the bytes of the bodies :meth:`_Puller._forget` took."""
    if not positions:
        return
    home = acquire(os.fspath(directory), sync=sync)
    try:
        state = SyncState(home)
        with home.env.begin(write=True) as txn:
            state.remove_positions(txn, "unswept", positions)
    finally:
        release(home)


def _done_with(directory: str | os.PathLike[str], erasure: int, sync: bool) -> None:
    home = acquire(os.fspath(directory), sync=sync)
    try:
        state = SyncState(home)
        with home.env.begin(write=True) as txn:
            state.remove_positions(txn, "pending", [erasure])
    finally:
        release(home)


def queue_commands(directory: str | os.PathLike[str], lines: list[bytes], *,
                   sync: bool = True) -> int:
    """Put commands (JSON lines) in the replica's outbox for the next ``push``.

    Each is checked first as the hub will check it (its schema and bounds, and no field
    shaped like a credential): the outbox is stored in the replica's home, and a secret
    queued there would stay in its file after the hub refused it. None is queued if one
    fails.
    Returns how many wait now.

    Raises:
        NotAReplicaError: the home was not cloned.
        BatchRefusedError: a line is not a command, breaks a bound or holds a credential;
            ``index`` is its place in ``lines`` and ``cause`` the refusal.
    """
    replica_info(directory)
    for index, line in enumerate(lines):
        try:
            refuse_credentials(checked_command(decode_command(line)))
        except msgspec.DecodeError as e:  # ValidationError too
            raise BatchRefusedError(index, InvalidCommandError(
                f"not a command: {e}; fix the field and retry")) from e
        except CommandError as e:
            raise BatchRefusedError(index, e) from e
    home = acquire(os.fspath(directory), sync=sync)
    try:
        state = SyncState(home)
        head = EventLog(home, LOG_NAME).head()
        with home.env.begin(write=True) as txn:
            for line in lines:
                state.queue(txn, head, line)
            return len(state.outbox(txn))
    finally:
        release(home)


def push(directory: str | os.PathLike[str], exchange: Exchange, *,
         sync: bool = True) -> PushOutcome:
    """Send the outbox's commands to the hub, then pull what it decided.

    Each command is answered (written, or refused and why) and leaves the outbox; a
    command is sent again only if the push died before its answer came back, and the
    hub takes a repeated key for a retry, so nothing is written twice.
    """
    info = replica_info(directory)
    home = acquire(os.fspath(directory), sync=sync)
    try:
        state = SyncState(home)
        with home.env.begin() as txn:
            waiting = state.outbox(txn)
    finally:
        release(home)
    results: list[PushResult] = []
    if waiting:
        for group in _push_groups([_as_sent(queued) for _, queued in waiting]):
            if len(group) == 1 and len(group[0].command) > PUSH_AT_MOST:
                # Alone it is still over what one frame carries: refused here, and it
                # leaves the outbox with the rest, rather than keep every later push
                # refused whole by the hub.
                results.append(PushResult(group[0].key, refused=(
                    f"this command is {len(group[0].command):,} bytes, over the "
                    f"{PUSH_AT_MOST:,} a push carries; send it to the hub directly "
                    "(`publish --to`), shorter")))
                continue
            pushed = _reply(exchange.call(encode(Push(
                info.name, [sent.based_on for sent in group],
                [sent.command for sent in group]))), Pushed)
            assert isinstance(pushed, Pushed)
            results.extend(pushed.results)
        home = acquire(os.fspath(directory), sync=sync)
        try:
            state = SyncState(home)  # before the transaction: opening a tree writes
            with home.env.begin(write=True) as txn:
                state.drop(txn, [key for key, _ in waiting])
        finally:
            release(home)
    return PushOutcome(results, pull(directory, exchange, sync=sync))


#: Bytes of commands one push frame carries at most: the hub's frames stop near 1 MiB.
PUSH_BUDGET = 512 << 10
#: The largest command a push sends (alone in its frame): what fits the hub's frames.
PUSH_AT_MOST = MAX_FRAME_BYTES - (64 << 10)


class _Sent(NamedTuple):
    """A queued command as a push sends it, with its key and based-on position."""

    based_on: int
    key: str
    command: bytes


def _as_sent(queued: Outboxed) -> _Sent:
    r"""A queued command (a JSON line) as a push sends it: msgpack.

    JSON spells a control character in six bytes (``\u001b``), msgpack in one: a
    command the hub takes directly (a terminal's coloured errors) could be twice that as
    a JSON line, and over the frame. A line that no longer decodes goes as it is, for
    the hub to refuse (and the outbox to drop).
    """
    try:
        command = decode_command(queued.command)
    except (msgspec.DecodeError, msgspec.ValidationError, CommandError):
        return _Sent(queued.based_on, "", queued.command)
    return _Sent(queued.based_on, command.key, msgspec.msgpack.encode(command))


def _push_groups(waiting: list[_Sent]) -> list[list[_Sent]]:
    """The outbox in order, split so each push frame stays under :data:`PUSH_BUDGET`.

    And under :data:`~lessonledger.sync.wire.MAX_BATCH_COMMANDS` commands: a push holds
    the hub's single writer while it is decided, so the hub takes no more in one.
    """
    groups: list[list[_Sent]] = [[]]
    size = 0
    for sent in waiting:
        if groups[-1] and (size + len(sent.command) > PUSH_BUDGET
                           or len(groups[-1]) >= MAX_BATCH_COMMANDS):
            groups.append([])
            size = 0
        groups[-1].append(sent)
        size += len(sent.command)
    return groups
