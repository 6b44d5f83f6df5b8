"""The Python API an agent uses: commands in, lessons out.

    from lessonledger.commands import Operation, open_ledger

    with open_ledger("~/.lessonledger") as ledger:
        ledger.observe_outcome(key="task-41", project=digest, passed=True, operations=[
            Operation(op="pytest:tests/", target="tests", ok=False, error="no conftest"),
            Operation(op="pytest:root", target="tests", ok=True, order=1)])
        for lesson in ledger.lessons(digest, session="s-2"):
            print(lesson.text)

A command is decided and appended, and the policies run on it, in one write transaction:
the view folds the log in order and, after each triggering event, the ledger appends what
the policies decide, before any other process can append. So the log always reads as
commands run one at a time, each followed by all it set off, however many agents write at
once. A command retried with the same ``key`` writes nothing and returns the original
receipt.

What recall, check and lessons show is recorded without waiting for a commit of its own:
the record rides in the next command's transaction, or a background flush commits it
within 50 ms (:mod:`lessonledger.commands.deferred` states the durability trade-off).
Every query that reads usage flushes first, so this process always reads its own recalls.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from uuid import UUID

from lessonledger.commands.access import AccessCommand
from lessonledger.commands.deferred import DEFAULT_DELAY, DeferredRecords
from lessonledger.commands.erasure import (
    Erasure,
    erased_positions,
    erasure_of,
    erasure_records,
)
from lessonledger.commands.errors import (
    BatchRefusedError,
    CommandError,
    CredentialError,
    InvalidCommandError,
    KeyReusedError,
)
from lessonledger.commands.handlers import (
    Decided,
    adopt,
    command_id,
    could_be,
    key_owner,
    occurred_ns,
    same_command,
)
from lessonledger.commands.messages import (
    AnyCommand,
    Erase,
    checked_command,
    command_from,
)
from lessonledger.commands.policies import TRIGGERS, react, trigger_id
from lessonledger.commands.read_side import HomeLock, ReadSide
from lessonledger.commands.recall import Recaller
from lessonledger.commands.receipts import MINTED_BY, Receipt, minted, minted_events
from lessonledger.commands.refusals import refuse_credentials, refuse_query, refuse_recorded
from lessonledger.commands.skill_handlers import decide_any
from lessonledger.commands.skill_messages import SkillCommand
from lessonledger.commands.skill_policies import SKILL_TRIGGERS, react_skills
from lessonledger.commands.skills import Skills
from lessonledger.commands.submissions import CHECKED, check_submitted
from lessonledger.commands.verbs import CommandVerbs
from lessonledger.ledger.errors import LedgerStorageError, LessonLedgerError
from lessonledger.ledger.events import AnyEvent, decode_event
from lessonledger.ledger.ids import derived_id, new_event_id
from lessonledger.ledger.lmdb_env import acquire, let_go_of_pages, release
from lessonledger.ledger.log import LOG_NAME, EventLog, NewEvent, Record, Writing
from lessonledger.ledger.submission import (
    Submission,
    new_event,
    refuse_ledger_only,
    refuse_overlong,
    refuse_submitted_credentials,
    to_new_event,
)
from lessonledger.projections.access import Grant
from lessonledger.projections.embedder import Embedder
from lessonledger.projections.rules import Rules
from lessonledger.projections.runner import Runner
from lessonledger.projections.store import ViewStore
from lessonledger.projections.views import (
    VIEW_NAME,
    access_view,
    audit_index,
    delta_view,
    registry,
)

__all__ = ["VIEW_NAME", "Admit", "Ledger", "Receipt", "open_ledger"]

C = TypeVar("C", bound="AnyCommand | SkillCommand | AccessCommand")
#: What a group commit decides: a command, or a raw submission.
Item = AnyCommand | SkillCommand | AccessCommand | Submission
#: A caller's last word on one item, inside the write transaction, right before it is
#: decided: its place in the group and the item in, the item to decide out (a hub
#: checks the sender's grant as it stands then). What it raises refuses the item.
Admit = Callable[[int, Item], Item]

#: Save a view kept whole after folding this many events, so reopening stays quick.
_SAVE_EVERY = 20_000
#: Save the rows of a view kept as rows once it has folded this many events since: in
#: the write transaction of the command that reaches it, so they commit with the events
#: they reflect. Not every command: LMDB rewrites every page a transaction touches, and
#: the same rows change again and again (a lesson's usage clocks at every recall), so
#: the longer the interval the fewer bytes per event (``lessonledger bench scale``
#: measures them); reopening refolds at most this many events.
_ROWS_EVERY = 5_000
#: Events folded between two drops of the pages of ``data.mdb`` mapped in (see
#: :func:`~lessonledger.ledger.lmdb_env.let_go_of_pages`): about every 20 commits of one
#: command, about every group commit. Measured on a 200,000-event home, 2,000 calls
#: dropping every 100 commits peaked at 350 MB, not 608; 14,000 calls (sync off, the
#: store dropping pages inside its saves too) at 397 MB every 100 events, 467 every 300,
#: in about the same CPU time (45 and 51 s). A drop costs about 1.2 ms on a 2M-event
#: home; there the pages a batch of 50 commands maps in took the agent from 345 to
#: 408 MB, so a group commit drops them between its commands too.
_LET_GO_EVERY = 50


class Ledger(CommandVerbs, ReadSide):
    """One home's lesson ledger: the write side, and the read side's queries.

    Commands, the policies and erasure run here, each in one write transaction; every
    query is :class:`~lessonledger.commands.read_side.ReadSide`'s and never writes.

    Args:
        home: the home directory (created if missing).
        sync: fsync every commit (default); False survives a process crash only.
        rules: the lesson rules' figures; the defaults of DESIGN §4 when omitted.
        record_delay: seconds within which a recall's record is committed when no
            command carries it sooner (see :mod:`lessonledger.commands.deferred`).
    """

    def __init__(self, home: str | os.PathLike[str], *, sync: bool = True,
                 rules: Rules | None = None, embedder: Embedder | None = None,
                 record_delay: float = DEFAULT_DELAY) -> None:
        self._lmdb = acquire(os.path.expanduser(os.fspath(home)), sync=sync)
        self.home = self._lmdb.path
        self.log = EventLog(self._lmdb, LOG_NAME)
        self._records: DeferredRecords = DeferredRecords(self.log, record_delay)
        self._store = ViewStore(self._lmdb)
        self._lock = HomeLock()
        #: Checks run first in each write transaction (see :meth:`guarded`), by thread.
        self._guards: dict[int, list[Callable[[], None]]] = {}
        self._open_views(rules, embedder)
        #: Skill bases, their deltas and tier-0 facts (:mod:`lessonledger.commands.skills`).
        self.skills = Skills(self, self.execute)

    def _open_views(self, rules: Rules | None, embedder: Embedder | None) -> None:
        """Load the saved views and vector index, and bring them up to the head."""
        self._erased_since_rebuild = False
        self._let_go_at = 0  # the position folded when the mapped pages were last let go
        self.runner = Runner(registry(rules), self._store)
        self._erasures = self.runner.erasures
        self.recaller = Recaller(Path(self._lmdb.path) / "vectors", self.log, self.view,
                                 embedder)
        # Not catch_up(): after a failed command, the records it carried wait their turn.
        self._refresh()

    # -- the fold and the policies ---------------------------------------------------

    def catch_up(self) -> int:
        """Commit queued recall records, fold every new event; return the head.

        The policies run after each trigger, and what they append is folded (and reacted
        to) before this returns, so a command or a query never sees a view without the
        consequences already decided. Commands run their policies in their own
        transaction (:meth:`execute`), so here the policies only act on events some other
        writer appended without them.
        """
        with self._lock:
            self._records.flush()
            return self._refresh()

    def flush(self) -> None:
        """Commit the recall records still queued, now (a query that reads usage does)."""
        self.catch_up()

    def _refresh(self) -> int:
        """Fold what others appended, leaving this process's queued records queued."""
        self._fold(self.log, self.log.append_decided)
        self._settle()
        return self.view.position

    def _fold(self, log: EventLog | Writing,
              append: Callable[[list[NewEvent]], object]) -> None:
        self.runner.fold(log, react=lambda record: self._react(record, log, append))
        if self.runner.erasures != self._erasures:
            # Nothing more is decided from what the erasure took: the runner folded the
            # views afresh, and the index built from the old view may no longer be saved.
            # It is built afresh once the transaction is over (_settle), when a read of
            # the log no longer sees the erased bodies.
            self.recaller.retired = True

    def _let_go_when_due(self) -> None:
        """Drop the mapped pages of ``data.mdb`` once :data:`_LET_GO_EVERY` events folded."""
        if self.runner.position - self._let_go_at >= _LET_GO_EVERY:
            let_go_of_pages(self._lmdb.path)
            self._let_go_at = self.runner.position

    def _settle(self) -> None:
        self._let_go_when_due()
        self._follow()
        if self._erased_since_rebuild:
            self._replace_saved()
        # Views kept as rows are saved in the commands' transactions; these are the ones
        # kept whole, and any a process folds far without writing (only others write).
        lagging = [name for name in self.runner.views
                   if self.runner.unsaved([name]) >= _SAVE_EVERY]
        if lagging:
            with self._lock:
                self.runner.save(lagging)

    def _save_rows(self, writing: Writing) -> bool:
        """Save the rows of views kept as rows, in ``writing``, when due; True if saved.

        After an erasure folded in this transaction they are due at once: the views were
        refolded without the erased bodies, and their rows replace the saved ones in the
        transaction that deletes the bodies, so no saved row outlives what it came from.
        """
        erased = self.runner.erasures != self._erasures
        due = [name for name in self.runner.kept_as_rows()
               if erased or self.runner.unsaved([name]) >= _ROWS_EVERY]
        if not erased:
            # One view a transaction, the furthest behind first: LMDB keeps a write
            # transaction's dirty pages allocated until the environment closes, so the
            # largest transaction sets the process's memory for good. The three views
            # saved together held 35 MB on a 200,000-event home; the largest alone, 15.
            due = sorted(due, key=lambda name: -self.runner.unsaved([name]))[:1]
        if due:
            self.runner.save(due, txn=writing.txn)
            return True
        return False

    def _refolded(self) -> None:
        self._erased_since_rebuild = True

    def _replace_saved(self) -> None:
        """After the fold met an erasure: the views and the index built afresh, saved.

        So that nothing derived from an erased body stays in the saved view or in the
        index files (a removal would leave its vector in the HNSW graph).
        """
        # No drop first: a saved view at or past this position has folded the erasure.
        self.save_view()
        self.recaller.save()
        self._erased_since_rebuild = False  # only now: a failure above is retried

    def _react(self, record: Record, log: EventLog | Writing,
               append: Callable[[list[NewEvent]], object]) -> bool:
        """Run the policies on ``record``; append what they decide. True if it appended."""
        kind = record.envelope.type
        if record.payload is None or (kind not in TRIGGERS and kind not in SKILL_TRIGGERS):
            return False
        event = decode_event(record.payload)
        decided = react(self.view, event, record.envelope) if kind in TRIGGERS else []
        decided += react_skills(delta_view(self.runner), event, record.envelope)
        if not decided:
            return False
        trigger, env = trigger_id(record.envelope), record.envelope
        ids = [derived_id(trigger, f"policy:{i}") for i in range(len(decided))]
        if log.position_of(ids[0].bytes) is not None:
            return False  # decided before: by the command's own transaction, another reader
        # A lesson's text joins fields that passed the screen one by one (a target
        # ``--password`` and an error ``hunter2xyz``) into what may be a credential: then
        # the command that set it off is refused. Folding another's append, nothing is
        # written rather than a home no process could open.
        try:
            refuse_recorded(decided)
        except CredentialError:
            if isinstance(log, Writing):
                raise
            return False
        append([
            new_event(event, stream=eid, version=0, event_id=eid, actor="policy",
                      principal=env.principal, session=env.session,
                      occurred_at=env.occurred_at)
            for eid, event in zip(ids, decided, strict=True)
        ])
        return True

    def save_view(self) -> None:
        """Store every view with the position it reflects, each in one transaction."""
        with self._lock:
            self.runner.save()

    # -- commands --------------------------------------------------------------------

    def execute(self, command: AnyCommand | SkillCommand | AccessCommand) -> Receipt:
        """Check, decide and append one command's events and the policies' reactions.

        All in one write transaction, from the log as it stands: whatever other
        processes do, the log reads as if commands ran one at a time, each followed by
        everything it set off, so concurrent agents end where a serial run would.

        Raises:
            CommandError: the command is refused; nothing of its own was written.
            StreamConflictError: another writer changed the lesson meanwhile.
        """
        command = checked_command(_not_erase(command))
        # Every field, the envelope's too, checked before the write lock is taken: the
        # check needs nothing but the command, and long texts take milliseconds.
        refuse_credentials(command)
        parent = command_id(command.key, key_owner(command))
        with self._transaction() as writing:
            outcome = (self._receipt(command, parent, writing)
                       or self._decide(command, parent, writing))
        if isinstance(outcome, CommandError):
            raise outcome
        return outcome

    def execute_all(self, commands: Sequence[AnyCommand | SkillCommand | AccessCommand],
                    *, admit: Admit | None = None) -> list[Receipt]:
        """Run commands in turn, all in one write transaction: every one, or none.

        Each is decided from the log as the ones before it left it, as :meth:`execute`
        would decide it then. ``admit`` (see :data:`Admit`) is given every command
        inside the transaction before any is decided; what it raises refuses the
        whole batch, unwrapped, and nothing is written.

        Raises:
            BatchRefusedError: one was refused (which, and why); nothing was written.
        """
        receipts: list[Receipt] = []
        checked = []
        for index, command in enumerate(commands):
            try:
                checked.append(checked_command(_not_erase(command)))
                refuse_credentials(checked[-1])
            except CommandError as e:
                raise BatchRefusedError(index, e) from e
        commands = checked
        with self._transaction() as writing:
            if admit is not None:
                # All before any is decided: a refusal then has nothing of the batch to undo.
                commands = [_as_command(admit(i, c)) for i, c in enumerate(commands)]
            for index, command in enumerate(commands):
                parent = command_id(command.key, key_owner(command))
                outcome = (self._receipt(command, parent, writing)
                           or self._decide(command, parent, writing))
                if isinstance(outcome, CommandError):
                    raise BatchRefusedError(index, outcome)
                receipts.append(outcome)
                self._let_go_when_due()  # within the transaction too: a batch reads a lot
        return receipts

    def execute_each(self, items: Sequence[AnyCommand | SkillCommand | AccessCommand | Submission],
                     *, checked: bool = False,
                     admit: Admit | None = None) -> list[Receipt | LessonLedgerError]:
        """Group commit: run commands (and raw submissions) in ONE durable transaction.

        Each is decided in arrival order from the log as the ones before it left it, with
        its policies, exactly as :meth:`execute` would decide it then; a refused one
        leaves nothing of its own and its neighbours still commit. The returned list has,
        in order, each one's receipt or the error that refused it. When the commit
        itself fails (the store), the error is raised and nothing was written.

        A refusal is decided before anything of the command is appended, so the common
        case costs no undo. Should one fail after appending (a policy error, a stream
        conflict a submission brings), the whole transaction is abandoned and the batch
        run again without it: what commits is always what a serial run would commit.

        With ``checked`` the caller has already run ``checked_command`` and the
        credential screen on every command, and :func:`parse_submission`'s screens on
        every submission (a hub does, on its front, so they stay off the one writer's
        path); they are not run again here. ``admit`` (see
        :data:`Admit`) is given each one inside the transaction right before it is
        decided, in every run of the group; a :class:`LessonLedgerError` it raises
        refuses that one alone.
        """
        results: list[Receipt | LessonLedgerError | None] = [None] * len(items)
        pending: list[int] = []
        items = list(items)
        for index, item in enumerate(items):
            if checked or isinstance(item, Submission):
                pending.append(index)
                continue
            try:
                command = checked_command(_not_erase(item))
                refuse_credentials(command)
            except CommandError as e:
                results[index] = e
                continue
            items[index] = command
            pending.append(index)
        while True:
            try:
                self._each(items, pending, results, admit, checked=checked)
            except _Undone as undone:
                results[undone.index] = undone.error
                pending.remove(undone.index)
                continue
            return [cast_result(r) for r in results]

    def execute_gathered(self, first: Item, more: Callable[[], Item | None], *,
                         admit: Admit | None = None
                         ) -> tuple[list[Item], list[Receipt | LessonLedgerError]]:
        """Group commit of what keeps arriving: decide each as it comes, commit them once.

        As :meth:`execute_each` with ``checked`` (the caller checked every command), but
        the group is not known up front: ``first`` is decided, then ``more()`` is asked
        for the next one whenever every one taken so far is decided, until it returns
        None; then the one durable commit. A hub calls it so that its writer decides the
        commands that have arrived while its clients are still sending the rest, instead
        of waiting for them all and then deciding. ``more`` runs inside the write
        transaction: it must be quick and must not raise. ``admit`` is as
        :meth:`execute_each`'s.

        Should one fail after appending, the transaction is abandoned and what was taken
        is run again, without it, as :meth:`execute_each` runs a group.

        Returns:
            Every item taken, in order, and each one's receipt or the error refusing it.
        """
        items: list[Item] = [first]
        results: list[Receipt | LessonLedgerError | None] = [None]
        try:
            with self._transaction() as writing:
                index = 0
                while True:
                    if index == len(items):
                        following = more()
                        if following is None:
                            break
                        items.append(following)
                        results.append(None)
                    results[index] = self._one(index, items[index], writing, admit,
                                               checked=True)
                    index += 1
        except _Undone:
            return items, self.execute_each(items, checked=True, admit=admit)
        return items, [cast_result(r) for r in results]

    def _each(self, items: Sequence[Item], pending: list[int],
              results: list[Receipt | LessonLedgerError | None], admit: Admit | None,
              *, checked: bool) -> None:
        with self._transaction() as writing:
            for index in pending:
                results[index] = self._one(index, items[index], writing, admit,
                                           checked=checked)
                self._let_go_when_due()  # within the transaction too: a batch reads a lot

    def _one(self, index: int, item: Item, writing: Writing,
             admit: Admit | None = None, *, checked: bool = False
             ) -> Receipt | LessonLedgerError:
        """Decide one item of a group commit; a refusal that appended nothing is returned.

        Raises:
            _Undone: it failed after appending (the group runs again without it).
        """
        before = writing.appended
        try:
            if admit is not None:
                item = admit(index, item)
            if isinstance(item, Submission):
                return self._submit(item, writing, screened=checked)
            parent = command_id(item.key, key_owner(item))
            return self._receipt(item, parent, writing) or self._decide(item, parent, writing)
        except LedgerStorageError:
            raise
        except LessonLedgerError as e:
            if writing.appended != before:
                raise _Undone(index, e) from e
            return e

    def _submit(self, submission: Submission, writing: Writing, *,
                screened: bool = False) -> Receipt:
        """Append one raw submission (idempotent by its event id) and fold it.

        An event a command or policy decides is held to its rules first
        (:func:`check_submitted`); a resubmission of one already written is not, as it
        appends nothing. ``screened``: it came through :func:`parse_submission`'s door
        (a hub's front), whose screens are not run twice.
        """
        if writing.position_of(submission.event_id.bytes) is None:
            if not screened:  # one built by hand has not been through that door
                refuse_ledger_only(submission.event)
                refuse_overlong(submission)
                refuse_submitted_credentials(submission)
            if isinstance(submission.event, CHECKED):
                check_submitted(submission.event, self.runner)
        positions = writing.append([to_new_event(submission)])
        self._fold(writing, writing.append)
        return Receipt([int(p) for p in positions])

    @contextmanager
    def _transaction(self) -> Iterator[Writing]:
        """The log's write transaction, with the view caught up inside it; settle after."""
        with self._lock:
            self._store.prepare()  # a tree cannot be made inside the write transaction
            writing: Writing | None = None
            saved = False
            try:
                # Queued recall records go first and are folded before deciding: what was
                # recalled in a session is in play for that session's outcome.
                with self._records.writing() as writing:
                    self._fold(writing, writing.append)
                    self._adopt(writing)
                    for check in self._guards.get(threading.get_ident(), ()):
                        check()
                    yield writing
                    saved = self._save_rows(writing)
            except BaseException:
                if writing is not None and (writing.appended or saved):
                    # The view folded events that were never committed: open it afresh.
                    self._open_views(self.view.wanted, self.recaller.embedder)
                raise
            self._settle()

    @contextmanager
    def guarded(self, check: Callable[[], None]) -> Iterator[None]:
        """Run ``check`` first in every write transaction this thread opens in the block.

        It runs once the views have folded everything committed before the transaction
        (LMDB's write lock orders the writers of every process), before anything is
        decided in it: what it raises refuses the transaction's work, and nothing of it
        is written. A hub checks there that the sender's grant still stands
        (:meth:`grant_as_folded`), for work that is not a group (an erasure, a push).
        """
        guards = self._guards.setdefault(threading.get_ident(), [])
        guards.append(check)
        try:
            yield
        finally:
            guards.remove(check)
            if not guards:
                self._guards.pop(threading.get_ident(), None)

    def grant_as_folded(self, public_key: str) -> Grant | None:
        """The key's grant as the views stand, without folding what others wrote since.

        Inside a write transaction (an :data:`Admit`, a :meth:`guarded` check) the views
        have folded every event committed before it, so this is the grant in force for
        what the transaction decides, at the cost of a dictionary look-up. Anywhere else
        :meth:`grant_for`, which folds first, is the one to ask.
        """
        return access_view(self.runner).grant_for(public_key)

    def _adopt(self, writing: Writing) -> None:
        """Record the rules this ledger was opened with, if they are not in force (rule 9)."""
        event = adopt(self.view)
        if event is not None:
            eid = new_event_id()
            writing.append([new_event(event, stream=eid, version=0, event_id=eid,
                                      actor="ledger")])
            self._fold(writing, writing.append)

    def _decide(self, command: AnyCommand | SkillCommand | AccessCommand, parent: UUID,
                writing: Writing) -> Receipt | CommandError:
        """Decide, append and fold one command in ``writing``; a refusal is returned.

        A refusal appends nothing of the command's, and the transaction still commits
        what came before it (the queued recall records and what they were folded with).
        """
        try:
            at = occurred_ns(command.occurred_at)
            decided = decide_any(command, self.runner)
        except CommandError as e:
            return e
        ids = [derived_id(parent, str(i)) for i in range(len(decided))]
        positions = writing.append([
            new_event(d.event, stream=d.stream or eid, version=_placed(d, writing),
                      event_id=eid, actor=command.actor, principal=command.principal,
                      session=command.session, occurred_at=at)
            for eid, d in zip(ids, decided, strict=True)
        ])
        self._fold(writing, writing.append)
        return Receipt([int(p) for p in positions], minted(decided))

    def _receipt(self, command: AnyCommand | SkillCommand | AccessCommand, parent: UUID,
                 log: Writing) -> Receipt | CommandError | None:
        """The receipt of a command already in the log, else None.

        A key that an earlier command of another kind used is refused (returned).
        """
        positions = _written_under(log, parent)
        if not positions and key_owner(command):
            # Written before keys were scoped by principal: the principal's own, or
            # another's that no longer shares the key.
            parent = command_id(command.key)
            positions = _written_under(log, parent)
            if positions and log.read(positions[0], limit=1)[0].envelope.principal != (
                    command.principal):
                return None
        if not positions:
            return None
        records = [log.read(p, limit=1)[0] for p in positions]
        events = [decode_event(cast_bytes(r.payload)) for r in records if r.payload]
        # Of an erased first event only the envelope is left to compare with.
        first = records[0]
        if not (same_command(command, events[0], first.envelope) if first.payload is not None
                else could_be(command, first.envelope)):
            return KeyReusedError(
                command.key, f"a different command (its first event: {records[0].envelope.type}, "
                f"position {positions[0]})")
        ids = minted_events(events)
        for record in records:
            name = MINTED_BY.get(record.envelope.type) if record.payload is None else None
            if name is not None and name not in ids:
                # Erased since: the id is the one its handler derived from the command's
                # key (see handlers), so the retry still gets the original receipt.
                ids[name] = derived_id(parent, name.removesuffix("_id"))
        return Receipt(positions, ids)

    def erase(self, **fields: Any) -> Erasure:
        """Erase content for good; see :class:`Erase` and :mod:`.erasure` for what goes.

        The bodies go in the transaction that records the ``Erased`` event (which names
        them), and the views are rebuilt without them before this returns. The bytes
        stay in the home's free pages until it is compacted (``lessonledger compact``).
        A retry with the same ``key`` erases nothing more and returns the original.

        Raises:
            CommandError: the command is refused; nothing was written.
        """
        command = checked_command(command_from(fields, Erase))
        refuse_credentials(command)  # the Erased record keeps reason and actor for good
        with self._transaction() as writing:
            if not erasure_of(writing, command):
                erased = erased_positions(writing, command, audit_index(self.runner))
                writing.append(erasure_records(command, erased))
                writing.erase_bodies(erased)
                self._fold(writing, writing.append)
            done = erasure_of(writing, command)
        assert done is not None
        return done

    def record(self, decide: Callable[[Runner], Sequence[AnyEvent]], *,
               actor: str = "ledger") -> list[int]:
        """Append what ``decide`` returns from the views as they stand, atomically.

        For the ledger's own bookkeeping events (sync's snapshots and erasure
        acknowledgements): ``decide`` is called inside the write transaction with the
        runner folded to the head, so what it reads cannot change before its events are
        appended. They carry no principal or session, so no erasure takes them.
        Returns their positions (none when ``decide`` returns nothing).
        """
        refuse_query(actor=actor)
        with self._transaction() as writing:
            events = decide(self.runner)
            refuse_recorded(events)  # raised out of the transaction: nothing written
            ids = [new_event_id() for _ in events]
            positions = writing.append([
                new_event(event, stream=eid, version=0, event_id=eid, actor=actor)
                for eid, event in zip(ids, events, strict=True)])
            if positions:
                self._fold(writing, writing.append)
        return [int(p) for p in positions]

    # -- lifetime --------------------------------------------------------------------

    def close(self) -> None:
        """Commit queued recall records, save the view and the index, release the home.

        Closing again does nothing; every query and command of a closed ledger raises
        :class:`~lessonledger.ledger.errors.LedgerClosedError` (the in-memory accessors
        ``view``, ``records`` and ``grant_as_folded`` still answer as last folded).
        """
        if self._lock.closed is not None:
            return
        with self._lock:
            try:
                self._records.close()
                self._refresh()
                self.save_view()
                self.recaller.save()
            finally:
                release(self._lmdb)
                self._lock.closed = self._lmdb.path

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _written_under(log: Writing, parent: UUID) -> list[int]:
    """The positions of the events derived from ``parent``, in order (none: not written)."""
    positions: list[int] = []
    while (p := log.position_of(derived_id(parent, str(len(positions))).bytes)):
        positions.append(int(p))
    return positions


def _placed(decided: Decided, writing: Writing) -> int:
    """The version ``decided`` is written at: its own, or past an event not of its kind.

    A view counts the versions of the events it folds, but a stream whose id can be known
    (a key's is a hash of its public key; a lesson's id is shown) may hold a raw
    submission of another type, which would otherwise conflict with every later decision
    on it, and so stop a key being granted or revoked. The views are caught up inside the
    write transaction, so no decision of the same kind can be missed by placing it after.
    """
    if decided.stream is None:
        return decided.version
    return max(decided.version, writing.next_version(decided.stream))


def _as_command(item: Item) -> AnyCommand | SkillCommand | AccessCommand:
    """What an :data:`Admit` returned for a command: a command still."""
    if isinstance(item, Submission):
        msg = "admit turned a batch's command into a raw submission"
        raise TypeError(msg)
    return item


def _not_erase(command: C | Erase) -> C:
    """Refuse an :class:`Erase` given as a command: erasing is :meth:`Ledger.erase`'s."""
    if isinstance(command, Erase):
        msg = "an erasure is not run by execute; call Ledger.erase (or lessonledger erase)"
        raise InvalidCommandError(msg, "$.command")
    return command


class _Undone(Exception):
    """A command of a group commit failed after appending: undo all, run without it."""

    def __init__(self, index: int, error: LessonLedgerError) -> None:
        super().__init__(index)
        self.index = index
        self.error = error


def cast_result(result: Receipt | LessonLedgerError | None) -> Receipt | LessonLedgerError:
    """A group commit's result, every slot of which was filled."""
    assert result is not None
    return result


def cast_bytes(payload: bytes | None) -> bytes:
    """A payload the caller has checked is present."""
    assert payload is not None
    return payload


@contextmanager
def open_ledger(home: str | os.PathLike[str], **options: Any) -> Iterator[Ledger]:
    """Open a home's ledger for the length of a ``with`` block."""
    ledger = Ledger(home, **options)
    try:
        yield ledger
    finally:
        ledger.close()
