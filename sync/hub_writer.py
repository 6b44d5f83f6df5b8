"""The hub's writer: a process of its own holding the home's Ledger, deciding and committing.

The hub's front (:mod:`lessonledger.sync.hub`) starts it with
``python -m lessonledger.sync.hub_writer CONFIG`` (CONFIG is JSON: the home, the two
``ipc://`` endpoints in the hub's private directory, the front's pid, the batch bound and
commit delay). In a process of its own its GIL does only what needs the log: deciding,
folding and committing. The front's frame checks, decoding, credential screening and
reply sends ran under the same GIL before and held the writer up for a third of its time
or more under load.

The front sends :class:`Work` it has checked already, msgpack-encoded, in one message
per burst it read (``[b"w", works]``); ``[b"g"]`` asks for the grants as they stand (a
handshake of a key the front does not know), ``[b"s"]`` asks it to drain: commit what it
was sent before, then report ``done`` and exit. It answers with :class:`Report` messages,
``[report, replies]`` where ``replies`` is the msgpack list ``[identity, reply, identity,
reply, ...]``: one a batch, sent after its durable commit.

It outlives nothing: the kernel kills it when the front exits (Linux's parent-death
signal), and it looks at its parent pid while idle everywhere else. It ignores SIGINT
and SIGTERM: the front drains it.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from collections import deque
from typing import Any

import msgspec
import zmq
from lessonledger.commands.access import AccessCommand
from lessonledger.commands.errors import AccessRefusedError
from lessonledger.commands.ledger import Ledger
from lessonledger.commands.messages import AnyCommand, Erase
from lessonledger.commands.receipts import Receipt
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.ledger.envelope import ROLE_ACTORS
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.ledger.ids import derived_id
from lessonledger.ledger.secrets import warm_up
from lessonledger.ledger.submission import Submission
from lessonledger.projections.access import AccessView
from lessonledger.projections.views import access_view
from lessonledger.sync import wire
from lessonledger.sync.authority import (
    Access,
    authorize_command,
    authorize_event,
    bound_to_caller,
    in_force,
    require_admin,
    require_own_principal,
)
from lessonledger.sync.hub_lock import hold
from lessonledger.sync.orphans import die_with_parent
from lessonledger.sync.protocol import encode_reply_frame
from lessonledger.sync.service import SyncService

__all__ = ["GRANTS_EVERY", "Report", "Work", "main"]

log = logging.getLogger("lessonledger.hub")

#: Seconds between two refreshes of the grants the front and the handshakes go by (what
#: the hub writes goes by the grant in force inside its transaction, not by these).
GRANTS_EVERY = 0.5
#: Milliseconds between two looks at the parent while no work comes.
PARENT_EVERY_MS = 50
#: Bytes of replies a report packs into one part; past this they go a part each, uncopied.
_PACK_AT_MOST = 64 << 10
#: Message tags, front to writer.
WORK, GRANTS, STOP = b"w", b"g", b"s"


class Work(msgspec.Struct, frozen=True, array_like=True):
    """One request the front checked: its sequence number, sender, id, kind and items.

    ``items`` are msgpack: the checked commands (``command``, ``batch``), the erasure,
    the parsed submission, or the sync frame's bytes; none for a ``check`` (a status
    or subscribe request whose key's grant the writer looks up).
    """

    seq: int
    identity: bytes
    request: int
    kind: str
    access: Access
    items: list[msgspec.Raw]


class Report(msgspec.Struct, array_like=True):
    """What the writer tells the front; the replies follow it in the same message.

    Attributes:
        kind: ``ready``, ``batch``, ``sync`` (replies sent at once), ``checked`` (a
            status or subscribe request's grant: the reply is empty if in force, else
            the refusal), ``grants`` (they changed), ``asked`` (asked for), ``done``,
            or ``failed`` (it could not open the home: ``error`` says why).
        head: the head after it; -1 when it did not move.
        taken: the :attr:`Work.seq` of every request the batch took, answered.
        batch: requests, events and seconds of a group commit.
        refused: the error class name of each refusal.
        grants: the grants in force (msgpack ``list[Grant]``) when they are news, else empty.
    """

    kind: str
    head: int = -1
    taken: list[int] = []
    batch: tuple[int, int, float] | None = None
    refused: list[str] = []
    grants: bytes = b""
    error: str = ""


_works = msgspec.msgpack.Decoder(list[Work])
_command = msgspec.msgpack.Decoder(AnyCommand | SkillCommand | AccessCommand)
_erase = msgspec.msgpack.Decoder(Erase)
_submission = msgspec.msgpack.Decoder(Submission)
_frame = msgspec.msgpack.Decoder(bytes)
_encoder = msgspec.msgpack.Encoder()


def _item(kind: str, raw: msgspec.Raw) -> Any:
    if kind in ("command", "batch"):
        return _command.decode(raw)
    if kind == "submit":
        return _submission.decode(raw)
    if kind == "erase":
        return _erase.decode(raw)
    return _frame.decode(raw)


def _reply(body: msgspec.Struct, request: int) -> bytes:
    return wire.encode_frame(body, request)


def _receipted(receipt: Receipt) -> wire.Receipted:
    return wire.Receipted(receipt.positions, receipt.ids)


class Writer:
    """The writer's loop over its two sockets (see the module doc).

    Args:
        ledger: the home's ledger, opened durable or not as the hub runs.
        inbox: the PULL the front's work arrives on.
        outbox: the PUSH its reports leave by.
        max_batch: requests committed together at most.
        commit_delay: seconds it waits at most for the clients of its last batch.
        parent: the front's pid; gone, the writer exits.
    """

    def __init__(self, ledger: Ledger, inbox: zmq.Socket[Any], outbox: zmq.Socket[Any], *,
                 max_batch: int, commit_delay: float, parent: int) -> None:
        self.ledger = ledger
        self.inbox = inbox
        self.outbox = outbox
        self.max_batch = max_batch
        self.commit_delay = commit_delay
        self.parent = parent
        self.sync = SyncService(ledger)
        self.pending: deque[Work] = deque()
        self.stopping = False
        self.asked = False
        self.last_clients = 1
        self.head = ledger.head()
        self._grants = b""
        #: The access view and its count of changes when the grants were last encoded.
        self._grants_seen: tuple[AccessView, int] | None = None

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        """Serve the front until it says stop (then report ``done``) or it is gone."""
        # The writer screens what policies compose and what a push brings: the detector is
        # built now, as the front's is, not on the first client's clock.
        warm_up()
        self.ledger.catch_up()
        self.head = self.ledger.head()
        self._report(Report("ready", head=self.head, grants=self._fresh_grants(force=True)))
        refreshed = time.monotonic()
        while True:
            if not self.pending:
                self._fill(PARENT_EVERY_MS)
                if not self.pending and os.getppid() != self.parent:
                    log.warning("hub writer: the front (pid %d) is gone; exiting", self.parent)
                    return
            if self.asked or time.monotonic() - refreshed > GRANTS_EVERY:
                # Another process (`lessonledger access grant|revoke`, `erase` on the
                # home) may have changed the grants: the front's copy takes them, so it
                # turns a revoked key away itself and the handshakes know new keys.
                self.ledger.catch_up()
                kind = "asked" if self.asked else "grants"
                grants = self._fresh_grants(force=self.asked)
                if grants or self.asked:
                    self._report(Report(kind, grants=grants))
                self.asked = False
                refreshed = time.monotonic()
            if self.pending:
                self._commit(self.pending.popleft())
            elif self.stopping:
                self._report(Report("done", head=self.head))
                return

    def _fill(self, wait_ms: float) -> None:
        """Take every message that has arrived; wait ``wait_ms`` for one if none has."""
        if wait_ms > 0 and not self.inbox.poll(max(1, round(wait_ms)), zmq.POLLIN):
            return
        while True:
            try:
                parts = self.inbox.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            tag = parts[0]
            if tag == WORK:
                self.pending.extend(_works.decode(parts[1]))
            elif tag == GRANTS:
                self.asked = True
            elif tag == STOP:
                self.stopping = True

    def _report(self, report: Report, replies: list[bytes] | None = None) -> None:
        replies = replies or []
        if sum(map(len, replies)) <= _PACK_AT_MOST:
            # Two parts, the replies packed in one: a part costs a send of its own (about
            # 1.5 us of CPU on each side), and a batch's replies are two parts per request.
            self.outbox.send_multipart([_encoder.encode(report), _encoder.encode(replies)])
        else:
            # Large replies (a clone's chunks) each as a part of its own and without a
            # copy: libzmq sends from the bytes themselves (pyzmq keeps them alive until
            # it is done), where packing would copy every chunk twice.
            self.outbox.send_multipart([_encoder.encode(report), *replies], copy=False)

    def _fresh_grants(self, *, force: bool = False, folded: bool = False) -> bytes:
        """The grants in force, encoded, if they changed since last sent (or ``force``).

        ``folded``: the views have just folded every commit (the writer's own batch
        did), so the access view is asked as it stands, and only when it folded a
        grant, revocation or erasure since the grants were last encoded.
        """
        view = access_view(self.ledger.runner)
        if folded and not force and self._grants_seen == (view, view.changes):
            return b""
        encoded = _encoder.encode(view.grants() if folded else self.ledger.grants())
        view = access_view(self.ledger.runner)  # ledger.grants() may have refolded anew
        self._grants_seen = (view, view.changes)
        if encoded == self._grants and not force:
            return b""
        self._grants = encoded
        return encoded

    # -- one group commit ------------------------------------------------------------------

    def _commit(self, first: Work) -> None:
        """One group commit, from ``first`` on; every request it took, answered.

        Commands and submissions are decided as they arrive, in one transaction
        (:meth:`Ledger.execute_gathered`): the writer works on the first while the others
        are still on their way. Each is authorized there, right before it is decided, by
        its key's grant as the transaction sees it (``admit``): a revocation or an
        erasure another process committed before the transaction counts, with no
        refreshing of grants (the views folded it with everything else).

        It takes what has arrived, up to the batch bound, and while fewer requests are
        here than clients were in the last batch it waits up to the commit delay for
        them (they were just answered and are about to send again): one fsync then
        covers them all.
        """
        ledger = self.ledger
        started = time.perf_counter()
        before = self.head
        replies: list[bytes] = []
        refused: list[str] = []
        group = [first]
        senders = {first.identity}
        #: The commands and submissions decided in the transaction, in order.
        single: list[Work] = []
        #: Batches, erasures, sync: after it, in transactions of their own.
        others: list[Work] = []
        until = time.monotonic() + self.commit_delay

        def take(work: Work) -> Any:
            if work.kind not in ("command", "submit"):
                others.append(work)
                return None
            single.append(work)
            return _item(work.kind, work.items[0])

        def admit(index: int, item: Any) -> Any:
            # Inside the transaction: the grants as every writer before it left them.
            return _admitted(ledger, single[index].access, item)

        def more() -> Any:
            while len(group) < self.max_batch:
                if not self.pending:
                    self._fill(0)
                while not self.pending:
                    left = until - time.monotonic()
                    if len(group) >= self.last_clients or left <= 0 or self.stopping:
                        return None
                    self._fill(left * 1000)
                work = self.pending.popleft()
                group.append(work)
                senders.add(work.identity)
                item = take(work)
                if item is not None:
                    return item
            return None

        item = take(first)
        if item is None:
            item = more()
        if item is not None:
            try:
                _, results = ledger.execute_gathered(item, more, admit=admit)
            except LessonLedgerError as e:
                # The store failed under the commit (disk full): nothing of the group was
                # written, and every client of it is told so, rather than left waiting.
                log.error("the group commit failed: %s", e)
                results = [e] * len(single)
            for work, result in zip(single, results, strict=True):
                if isinstance(result, Receipt):
                    body: msgspec.Struct = _receipted(result)
                else:
                    body = wire.refusal(result)
                    refused.append(type(result).__name__)
                    log.info("refused %s from client %s: %s", work.kind, work.identity.hex(),
                             type(result).__name__)
                replies += (work.identity, _reply(body, work.request))
        self.last_clients = len(senders)
        # Batches (all or none), erasures and sync's requests (a push decides each of its
        # commands; an ack records one event) run in transactions of their own.
        for work in others:
            if work.kind == "check":
                self._report(Report("checked", taken=[work.seq]),
                             [work.identity, self._check(work, refused)])
                continue
            if work.kind == "sync":
                # Sent at once: a sync reply waits for no commit of the group (a push or an
                # ack committed its own), and a replica keeps several fetches in flight,
                # which would otherwise all wait for the last one's chunk.
                frames = self._sync_replies(work, refused)
                self._report(Report("sync"), [part for data in frames
                                              for part in (work.identity, data)])
                continue
            replies += (work.identity, self._alone(work, refused))
        self.head = ledger.head()
        grants = b""
        if any(work.kind in ("command", "batch", "sync") for work in group):
            # Before anyone is answered: the front turns a key revoked here away from
            # its receipt on (the writer would refuse it anyway).
            grants = self._fresh_grants(folded=True)
        seconds = time.perf_counter() - started
        self._report(Report("batch", head=self.head if self.head != before else -1,
                            taken=[work.seq for work in group],
                            batch=(len(group), self.head - before, seconds),
                            refused=refused, grants=grants), replies)

    def _check(self, work: Work, refused: list[str]) -> bytes:
        """Empty if the key still has a grant after folding what any process wrote.

        A status or subscribe request of a key goes by its grant as it stands, as a
        write does, not by the front's copy of the grants: the front answers it once
        this is empty, and sends this refusal otherwise.
        """
        try:
            self.ledger.catch_up()
            _current(self.ledger, work.access)
            return b""
        except LessonLedgerError as e:
            refused.append(type(e).__name__)
            log.info("refused %s from client %s: %s", work.kind, work.identity.hex(),
                     type(e).__name__)
            return _reply(wire.refusal(e), work.request)

    def _alone(self, work: Work, refused: list[str]) -> bytes:
        ledger = self.ledger
        try:
            if work.kind == "erase":
                require_admin(work.access)
                command: Erase = _item(work.kind, work.items[0])
                require_own_principal(work.access, command.principal)
                # Who erased is the key's principal: the record's "by" is its actor.
                fields = msgspec.structs.asdict(bound_to_caller(command,
                                                                work.access.principal))
                with ledger.guarded(lambda: _still_admin(ledger, work.access)):
                    erasure = ledger.erase(**fields)
                return _reply(wire.Answer(msgspec.Raw(msgspec.msgpack.encode(erasure))),
                              work.request)

            # Inside the transaction, every command before any is decided.
            commands = [_item(work.kind, raw) for raw in work.items]
            receipts = ledger.execute_all(
                commands, admit=lambda _, command: _admitted(ledger, work.access, command))
            return _reply(wire.Receipts([_receipted(r) for r in receipts]), work.request)
        except LessonLedgerError as e:
            error: LessonLedgerError = e
        refused.append(type(error).__name__)
        log.info("refused %s from client %s: %s", work.kind, work.identity.hex(),
                 type(error).__name__)
        return _reply(wire.refusal(error), work.request)

    def _sync_replies(self, work: Work, refused: list[str]) -> list[bytes]:
        """The frames answering a sync request (several for a multi-segment fetch).

        Decided by the key's grant as it stands now: reads (hello, ids, fetch) go by
        the grant after folding what every process committed before; each write a push
        or an acknowledgement makes goes by the grant inside its own transaction, and a
        grant changed in between refuses that write (a replica pushes again: its
        commands carry their keys).
        """
        ledger = self.ledger
        try:
            access = work.access
            if access.key:
                ledger.catch_up()
                access = in_force(access, ledger.grant_as_folded(access.key))
            # The hub's authority decided who the peer is: its grant filters the bodies
            # a partial replica gets and is the principal of what it pushes.
            peer = access.key or work.identity.hex()
            with ledger.guarded(lambda: _unchanged(ledger, access)):
                frames = self.sync.handle(_item(work.kind, work.items[0]), peer,
                                          access.grant, None if access.key else access)
            return [encode_reply_frame(frame, work.request) for frame in frames]
        except LessonLedgerError as e:
            refused.append(type(e).__name__)
            log.info("refused sync from client %s: %s", work.identity.hex(), type(e).__name__)
            return [_reply(wire.refusal(e), work.request)]


# -- authorization inside the writer's transaction -------------------------------------------


def _current(ledger: Ledger, access: Access) -> Access:
    """The connection's access by its key's grant as the writer's transaction sees it.

    Called inside the write transaction only (an admit, a guard): there the views have
    folded every grant, revocation and erasure committed before it, by any process.

    Raises:
        AccessRefusedError: the key has no grant now.
    """
    return in_force(access, ledger.grant_as_folded(access.key)) if access.key else access


def _admitted(ledger: Ledger, access: Access, item: Any) -> Any:
    """``item`` as the writer decides it: authorized by its key's grant in the transaction.

    Called inside the write transaction only (an admit).

    Raises:
        CommandError: the key has no grant now, or its grant does not cover ``item``.
    """
    current = _current(ledger, access)
    if current.principal != access.principal and not isinstance(item, Submission):
        # The key was granted to another principal since the front bound the command.
        item = bound_to_caller(item, current.principal)
    return _authorized(ledger, current, item)


def _still_admin(ledger: Ledger, access: Access) -> None:
    """Refuse an erasure whose key is no longer an admin's, or no longer its principal's.

    Raises:
        AccessRefusedError: it is not.
    """
    current = _current(ledger, access)
    require_admin(current)
    if current.principal != access.principal:
        raise AccessRefusedError(current.principal, "", "admin", (
            f"erase as {access.principal!r}: the key was granted to another principal "
            "while the erasure waited; send it again"))


def _unchanged(ledger: Ledger, access: Access) -> None:
    """Refuse a write of a sync request whose key's grant changed since it was checked.

    Raises:
        AccessRefusedError: the grant is gone, or is another one now.
    """
    current = _current(ledger, access)
    if current != access:
        raise AccessRefusedError(current.principal, "", "write", (
            "push with the grant this request was checked by: it changed meanwhile; "
            "push again"))


def _lesson_scope(ledger: Ledger, lesson_id: Any) -> str | None:
    row = ledger.view.lessons.get(lesson_id)
    return None if row is None else row.scope


def _authorized(ledger: Ledger, access: Access, item: Any) -> Any:
    """The item with the connection's principal, if ``access``'s grant covers it.

    Raises:
        CommandError: the grant does not cover it, or it names another principal.
    """
    if isinstance(item, Submission):
        # parse_submission already refused what only the ledger writes (LEDGER_ONLY).
        authorize_event(access, item.event, lambda i: _lesson_scope(ledger, i))
        require_own_principal(access, item.principal)
        # Its id is the sender's own, as a command's key is: every envelope shows ids,
        # so a raw id taken as given could squat the one another principal's next
        # command derives, or be answered with another's receipt.
        # Who wrote it and who decided are the key's too (see bound_to_caller).
        event = item.event
        by = getattr(event, "by", None)
        if isinstance(by, str) and by != access.principal:
            event = msgspec.structs.replace(event, by=access.principal)
        return msgspec.structs.replace(
            item, principal=access.principal, event=event,
            actor=item.actor if item.actor in ROLE_ACTORS else access.principal,
            event_id=derived_id(item.event_id, f"submitted by {access.principal}"))
    # Checked on the front (hub._checked) and bound to the caller there.
    authorize_command(access, item, lambda i: _lesson_scope(ledger, i))
    return item


# -- the process -----------------------------------------------------------------------------



def serve(config: dict[str, Any]) -> None:
    """Open the home and serve the front the config names until it says stop."""
    ctx: zmq.Context[Any] = zmq.Context()
    inbox = ctx.socket(zmq.PULL)
    outbox = ctx.socket(zmq.PUSH)
    # Unbounded: the front bounds what it sends by its queue, and a report dropped or
    # blocked here would leave clients unanswered.
    inbox.setsockopt(zmq.RCVHWM, 0)
    outbox.setsockopt(zmq.SNDHWM, 0)
    outbox.setsockopt(zmq.LINGER, 5000)
    inbox.setsockopt(zmq.LINGER, 0)
    inbox.connect(config["work"])
    outbox.connect(config["reports"])
    try:
        try:
            # Held until this process ends; taken before the home is opened (which may
            # fold and save views) where there is a home to hold it in.
            held = os.path.isdir(config["home"]) and hold(config["home"], config["bind"])
            ledger = Ledger(config["home"], sync=config["sync"])
            if not held:
                hold(config["home"], config["bind"])
        except LessonLedgerError as e:
            # Told to the front, which stops with it as its one-line error (a traceback
            # on the hub's stderr would say the same in thirty lines).
            outbox.send_multipart([_encoder.encode(Report("failed", error=str(e)))])
            raise SystemExit(2) from None
        with ledger:
            Writer(ledger, inbox, outbox, max_batch=config["max_batch"],
                   commit_delay=config["commit_delay"], parent=config["parent"]).run()
    finally:
        inbox.close()
        outbox.close()
        ctx.term()


def main(argv: list[str] | None = None) -> None:
    """The writer process: its JSON config is the one command-line argument."""
    config = json.loads((argv if argv is not None else sys.argv[1:])[0])
    die_with_parent(signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=config["log_level"], stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if os.getppid() != config["parent"]:
        return  # the front died before the signal was asked for
    serve(config)


if __name__ == "__main__":
    main()
