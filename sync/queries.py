"""The hub's read side: every query answered as the asking connection may see it.

:func:`answer` runs one query on a :class:`~lessonledger.commands.read_side.Reader`,
the hub's reader thread's own: it reads LMDB snapshots, so it never waits for the
writer's commit. Reading a project needs a read grant on it; what a query records is
recorded under the connection's principal.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec
from lessonledger.commands.errors import InvalidCommandError, UnknownLessonError
from lessonledger.commands.read_side import Reader
from lessonledger.commands.skills import Skills, delta_from_prefix
from lessonledger.ledger.envelope import ROLE_ACTORS
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.projections.resolution import DEFAULT_BUDGET
from lessonledger.sync import wire
from lessonledger.sync.authority import (
    Access,
    in_force,
    may_read,
    may_read_body,
    require_own_principal,
    require_read,
)

__all__ = ["LOG_PAGE_BYTES", "MAX_LOG_RECORDS", "answer", "answer_bytes"]


class _Project(msgspec.Struct, forbid_unknown_fields=True):
    project: str
    session: str = ""
    record: bool = True
    actor: str = "agent"
    principal: str = ""


class _Recall(_Project, forbid_unknown_fields=True):
    query: str = ""
    as_of: int | None = None


class _Check(_Project, forbid_unknown_fields=True):
    operation: str = ""
    target: str = ""
    as_of: int | None = None


class _Why(msgspec.Struct, forbid_unknown_fields=True):
    lesson_id: UUID
    project: str | None = None
    query: str | None = None
    as_of: int | None = None


class _Lesson(msgspec.Struct, forbid_unknown_fields=True):
    lesson_id: UUID


class _Catalogue(msgspec.Struct, forbid_unknown_fields=True):
    project: str | None = None
    everything: bool = False


class _Find(msgspec.Struct, forbid_unknown_fields=True):
    text: str


class _When(msgspec.Struct, forbid_unknown_fields=True):
    when_ns: int


class _Log(msgspec.Struct, forbid_unknown_fields=True):
    start: int = 1
    limit: int = 1000


class _Deltas(msgspec.Struct, forbid_unknown_fields=True):
    skill: str | None = None
    root: str | None = None
    status: str | None = None


class _Base(msgspec.Struct, forbid_unknown_fields=True):
    skill: str
    root: str = "user"


class _Learned(msgspec.Struct, forbid_unknown_fields=True):
    namespace: str
    scope: str = "global"


class _Facts(msgspec.Struct, forbid_unknown_fields=True):
    namespace: str | None = None
    inert: bool = False


class _Resolve(msgspec.Struct, forbid_unknown_fields=True):
    skill: str
    base_text: str
    root: str = "user"
    scope: str = "global"
    learning: bool = True
    session: str = ""
    budget: int = DEFAULT_BUDGET
    available: list[str] | None = None
    actor: str = "agent"
    principal: str = ""
    trial: list[UUID] = []


class _Diff(msgspec.Struct, forbid_unknown_fields=True):
    skill: str
    base_text: str
    delta_id: UUID
    root: str = "user"
    scope: str = "global"


#: Records a ``log`` query returns at most.
MAX_LOG_RECORDS = 5000
#: Bytes of records a ``log`` answer holds at most (one record always): the rest of a
#: reply frame is its envelope. Fewer records than asked come back when they are large.
LOG_PAGE_BYTES = wire.MAX_FRAME_BYTES - (16 << 10)
_row_bytes = msgspec.msgpack.Encoder().encode


def _actor(access: Access, actor: str) -> str:
    """A query record's actor: a role as given, else the connection's principal."""
    return actor if actor in ROLE_ACTORS else access.principal


def answer(reader: Reader, access: Access, query: wire.QueryRequest) -> Any:
    """Answer one query from the read side, as ``access`` may see it.

    Reading a project needs a read grant on it; what a query shows an agent is recorded
    under the connection's principal, never one the client names. The grant is the
    key's as it stands now, folded from the log when the query is answered: the one the
    front saw may predate a revocation or an erasure another process committed.

    Raises:
        LessonLedgerError: the read side's own refusals, and :class:`NotGrantedError`.
        msgspec.ValidationError: the arguments do not fit the query.
    """
    if access.key:
        access = in_force(access, reader.grant_for(access.key))
    args = query.args
    if query.query.startswith("skill_"):
        return _skill_answer(Skills(reader), access, query.query, args)
    match query.query:
        case "head":
            return reader.head()
        case "position_at":
            return reader.position_at(msgspec.convert(args, _When).when_ns)
        case "lessons":
            a = msgspec.convert(args, _Project)
            require_read(access, a.project)
            require_own_principal(access, a.principal)
            return reader.lessons(a.project, session=a.session, record=a.record,
                                  actor=_actor(access, a.actor),
                                  principal=access.principal)
        case "recall":
            r = msgspec.convert(args, _Recall)
            require_read(access, r.project)
            require_own_principal(access, r.principal)
            return reader.recall(r.project, r.query, session=r.session, record=r.record,
                                 actor=_actor(access, r.actor), principal=access.principal,
                                 as_of=r.as_of)
        case "check":
            c = msgspec.convert(args, _Check)
            require_read(access, c.project)
            require_own_principal(access, c.principal)
            return reader.check(c.project, c.operation, c.target, session=c.session,
                                record=c.record, actor=_actor(access, c.actor),
                                principal=access.principal,
                                as_of=c.as_of)
        case "why":
            w = msgspec.convert(args, _Why)
            story = reader.why(w.lesson_id, project=w.project, query=w.query, as_of=w.as_of)
            require_read(access, story.lesson.scope)
            if w.project is not None:
                require_read(access, w.project)
            return story
        case "lesson":
            row = reader.lesson(msgspec.convert(args, _Lesson).lesson_id)
            require_read(access, row.scope)
            return row
        case "history":
            chain = reader.history(msgspec.convert(args, _Lesson).lesson_id)
            for row in chain:
                require_read(access, row.scope)
            return chain
        case "catalogue":
            cat = msgspec.convert(args, _Catalogue)
            if cat.project is not None:
                require_read(access, cat.project)
            return [r for r in reader.catalogue(cat.project, everything=cat.everything)
                    if may_read(access, r.scope)]
        case "find_lesson":
            return reader.find_lesson(msgspec.convert(args, _Find).text)
        case "outcome_stats":
            p = msgspec.convert(args, _Project)
            require_read(access, p.project)
            return reader.outcome_stats(p.project)
        case "log":
            span = msgspec.convert(args, _Log)
            records = reader.log.read(max(span.start, 1),
                                      limit=max(1, min(span.limit, MAX_LOG_RECORDS)))
            # Every envelope travels (the chain must verify); a body only where it may
            # be read. A page fits one reply frame: the client asks for the rest.
            page: list[tuple[Any, bytes | None]] = []
            size = 0
            for record in records:
                shown = (record.envelope, record.payload if record.payload is not None
                         and may_read_body(access, record.envelope.scope,
                                           record.envelope.type, record.payload,
                                           lambda i: _lesson_scope(reader, i),
                                           reader.delta_scope) else None)
                size += len(_row_bytes(shown))
                if page and size > LOG_PAGE_BYTES:
                    break
                page.append(shown)
            return page


def _skill_answer(skills: Skills, access: Access, query: str, args: dict[str, Any]) -> Any:
    """A ``skill_*`` query: deltas and facts of the projects ``access`` may read.

    A skill base has no project (any grant reads it, as a global lesson); a delta or a
    fact is read under its scope. A resolution needs a read grant on its scope and is
    not recorded here: the answer says whether the session's first is on record, and the
    client records it as a command if not.
    """
    match query:
        case "skill_deltas":
            d = msgspec.convert(args, _Deltas)
            return [r for r in skills.deltas(d.skill, d.root, d.status)
                    if may_read(access, r.scope)]
        case "skill_base":
            b = msgspec.convert(args, _Base)
            return skills.base(b.skill, b.root)
        case "skill_find_delta":
            text = msgspec.convert(args, _Find).text
            return delta_from_prefix([r.delta_id for r in skills.deltas()
                                      if may_read(access, r.scope)], text)
        case "skill_learned":
            n = msgspec.convert(args, _Learned)
            require_read(access, n.scope)
            return skills.learned(n.namespace, None, n.scope)
        case "skill_facts":
            f = msgspec.convert(args, _Facts)
            return [listed for listed in skills.fact_list(f.namespace, inert=f.inert)
                    if may_read(access, listed.fact.scope)]
        case "skill_resolve":
            r = msgspec.convert(args, _Resolve)
            require_read(access, r.scope)
            require_own_principal(access, r.principal)
            recorded = skills.first_recorded(r.session, r.skill, r.root, r.scope)
            result = skills.resolve(
                r.skill, r.base_text, root=r.root, scope=r.scope, learning=r.learning,
                session=r.session, budget=r.budget, available=r.available,
                actor=_actor(access, r.actor),
                principal=access.principal, trial=r.trial, record=False)
            return result, recorded
        case "skill_diff":
            g = msgspec.convert(args, _Diff)
            require_read(access, g.scope)
            for row in skills.deltas(g.skill, g.root):
                if row.delta_id == g.delta_id:
                    require_read(access, row.scope)
            return skills.diff(g.skill, g.base_text, g.delta_id, root=g.root, scope=g.scope)
    msg = f"no skill query {query!r}"
    raise InvalidCommandError(msg, "$.query")


def _lesson_scope(reader: Reader, lesson_id: UUID) -> str | None:
    try:
        return reader.lesson(lesson_id).scope
    except UnknownLessonError:
        return None


def answer_bytes(reader: Reader, access: Access, query: wire.QueryRequest,
                 request: int, *, limit: int = wire.MAX_REPLY_BYTES) -> bytes:
    """The reply frame to one query: its answer, or its refusal (an answer over ``limit``)."""
    try:
        value = answer(reader, access, query)
        body: msgspec.Struct = wire.Answer(msgspec.Raw(msgspec.msgpack.encode(value)))
    except LessonLedgerError as e:
        body = wire.refusal(e)
    except msgspec.ValidationError as e:
        body = wire.refusal(InvalidCommandError(f"invalid {query.query} query: {e}"))
    frame = wire.encode_frame(body, request)
    if len(frame) > limit:
        # Sent anyway, libzmq at the client would drop it and the client retry in vain.
        return wire.encode_frame(wire.refusal(wire.WireError(
            f"the answer to this {query.query} query is {len(frame):,} bytes, over the "
            f"{limit:,} a reply may be; ask for less (one --project, "
            "without --all)", "oversize")), request)
    return frame
