"""The fact table: tier-0 learned values, and the tools declared to read them.

A fact is a row a tool reads (``learned(namespace)``), never text in a prompt. The
latest ``FactLearned`` for a (namespace, key, scope) is its value. A tool that honours a
namespace declares it (``ConsumerDeclared``); a fact whose namespace no tool declared is
*inert*: learned, but read by nothing, and reported as such rather than presented as
learning.
"""

from __future__ import annotations

from typing import ClassVar
from uuid import UUID

import msgspec
from lessonledger.ledger.events import (
    AnyEvent,
    ConsumerDeclared,
    FactLearned,
    decode_event,
    tag_of,
)
from lessonledger.ledger.log import Record
from lessonledger.projections.state_view import StateCodec, StateView

__all__ = ["FactRow", "FactView"]



class FactRow(msgspec.Struct, kw_only=True):
    """A learned value as it stands: the latest for its namespace, key and scope."""

    fact_id: UUID
    namespace: str
    key: str
    value: str
    scope: str
    provenance: str
    position: int
    #: How many times it was learned (the latest value wins).
    learned: int = 1


class _State(msgspec.Struct):
    position: int = 0
    facts: dict[str, FactRow] = {}
    consumers: dict[str, list[str]] = {}


#: The events the table folds.
_FOLDS: frozenset[str] = frozenset(tag_of(kind) for kind in (FactLearned, ConsumerDeclared))


class FactView(StateView[_State]):
    """Folds ``FactLearned`` and ``ConsumerDeclared``."""

    _codec = StateCodec(_State)

    def __init__(self) -> None:
        self._s = _State()


    def facts(self, namespace: str | None = None) -> list[FactRow]:
        """Every fact (of one namespace), by namespace, key and scope."""
        rows = [r for r in self._s.facts.values()
                if namespace is None or r.namespace == namespace]
        return sorted(rows, key=lambda r: (r.namespace, r.key, r.scope))

    def consumers(self, namespace: str) -> list[str]:
        """The tools declared to read a namespace, sorted."""
        return sorted(self._s.consumers.get(namespace, []))

    def learned(self, namespace: str, scope: str) -> dict[str, str]:
        """A namespace's values in a scope: global ones, overridden by the scope's own."""
        found = {r.key: r.value for r in self.facts(namespace) if r.scope == "global"}
        found.update((r.key, r.value) for r in self.facts(namespace) if r.scope == scope)
        return found

    def inert(self) -> list[FactRow]:
        """Facts that no declared consumer reads."""
        return [r for r in self.facts() if not self._s.consumers.get(r.namespace)]

    #: The types it folds (the runner hands it no other record) and whose bodies it reads.
    folds: ClassVar[frozenset[str] | None] = _FOLDS
    reads: ClassVar[frozenset[str]] = _FOLDS
    decodes: ClassVar[frozenset[str]] = _FOLDS

    def fold(self, record: Record, event: AnyEvent | None) -> None:
        """As :meth:`apply`, given the body decoded once for every view (or None)."""
        self._s.position = record.envelope.position
        if record.payload is None or record.envelope.type not in _FOLDS:
            return
        if event is None:
            event = decode_event(record.payload)  # refused as it always was
        match event:
            case FactLearned() as event:
                key = f"{event.namespace}\x1f{event.key}\x1f{event.scope}"
                old = self._s.facts.get(key)
                self._s.facts[key] = FactRow(
                    fact_id=event.fact_id, namespace=event.namespace, key=event.key,
                    value=event.value, scope=event.scope, provenance=event.provenance,
                    position=record.envelope.position, learned=(old.learned + 1) if old else 1)
            case ConsumerDeclared() as event:
                tools = self._s.consumers.setdefault(event.key, [])
                if event.tool not in tools:
                    tools.append(event.tool)
