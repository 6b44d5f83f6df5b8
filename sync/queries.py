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
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.sync import wire
from lessonledger.sync.authority import (
    Access,
    body_scope,
    may_read,
    require_own_principal,
    require_read,
)

__all__ = ["MAX_LOG_RECORDS", "answer", "answer_bytes"]


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


#: Records a ``log`` query returns at most.
MAX_LOG_RECORDS = 5000


def answer(reader: Reader, access: Access, query: wire.QueryRequest) -> Any:
    """Answer one query from the read side, as ``access`` may see it.

    Reading a project needs a read grant on it; what a query shows an agent is recorded
    under the connection's principal, never one the client names.

    Raises:
        LessonLedgerError: the read side's own refusals, and :class:`NotGrantedError`.
        msgspec.ValidationError: the arguments do not fit the query.
    """
    args = query.args
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
                                  actor=a.actor, principal=access.principal)
        case "recall":
            r = msgspec.convert(args, _Recall)
            require_read(access, r.project)
            require_own_principal(access, r.principal)
            return reader.recall(r.project, r.query, session=r.session, record=r.record,
                                 actor=r.actor, principal=access.principal, as_of=r.as_of)
        case "check":
            c = msgspec.convert(args, _Check)
            require_read(access, c.project)
            require_own_principal(access, c.principal)
            return reader.check(c.project, c.operation, c.target, session=c.session,
                                record=c.record, actor=c.actor, principal=access.principal,
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
            # be read.
            return [(r.envelope, r.payload if r.payload is not None and may_read(
                access, body_scope(r.envelope.scope, r.envelope.type, r.payload,
                                   lambda i: _lesson_scope(reader, i))) else None)
                    for r in records]


def _lesson_scope(reader: Reader, lesson_id: UUID) -> str | None:
    try:
        return reader.lesson(lesson_id).scope
    except UnknownLessonError:
        return None


def answer_bytes(reader: Reader, access: Access, query: wire.QueryRequest,
                 request: int) -> bytes:
    """The reply frame to one query: its answer, or its refusal."""
    try:
        value = answer(reader, access, query)
        body: msgspec.Struct = wire.Answer(msgspec.Raw(msgspec.msgpack.encode(value)))
    except LessonLedgerError as e:
        body = wire.refusal(e)
    except msgspec.ValidationError as e:
        body = wire.refusal(InvalidCommandError(f"invalid {query.query} query: {e}"))
    return wire.encode_frame(body, request)
