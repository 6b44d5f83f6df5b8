"""Hypothesis strategies derived from the msgspec schemas themselves.

Building values from ``msgspec.inspect`` type info keeps the strategies in step with the
catalogue: a new field or bound is generated without touching the tests.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import msgspec.inspect as mi
from hypothesis import strategies as st
from lessonledger.ledger.events import (
    LEDGER_ONLY,
    AnyEvent,
    LessonProposed,
    OutcomeObserved,
    tag_of,
)
from lessonledger.ledger.submission import Submission

_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)


def _str(t: mi.StrType) -> st.SearchStrategy[str]:
    if t.pattern:
        return st.from_regex(t.pattern, fullmatch=True)
    return st.text(
        st.characters(codec="utf-8"),
        min_size=t.min_length or 0,
        max_size=min(t.max_length or 40, 40),
    )


def _int(t: mi.IntType) -> st.SearchStrategy[int]:
    low = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else -(1 << 40))
    high = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else 1 << 40)
    return st.integers(low, min(high, 1 << 40))


def from_type_info(t: mi.Type) -> st.SearchStrategy[Any]:
    """A strategy for values of a msgspec type, respecting its bounds."""
    simple: dict[type, st.SearchStrategy[Any]] = {
        mi.BoolType: st.booleans(),
        mi.UUIDType: st.uuids(),
        mi.NoneType: st.none(),
        mi.DateTimeType: st.datetimes(datetime(1970, 1, 2), datetime(2261, 1, 1),
                                      timezones=st.just(UTC)),
    }
    if type(t) in simple:
        return simple[type(t)]
    if isinstance(t, mi.StrType):
        return _str(t)
    if isinstance(t, mi.IntType):
        return _int(t)
    if isinstance(t, mi.BytesType):
        return st.binary(min_size=t.min_length or 0, max_size=min(t.max_length or 40, 40))
    if isinstance(t, mi.FloatType):
        return st.floats(t.ge or 0.0, t.le or 1.0)
    if isinstance(t, mi.LiteralType):
        return st.sampled_from(t.values)
    if isinstance(t, mi.ListType):
        return st.lists(from_type_info(t.item_type), min_size=t.min_length or 0,
                        max_size=min(t.max_length or 4, 4))
    if isinstance(t, mi.DictType):
        return st.dictionaries(from_type_info(t.key_type), from_type_info(t.value_type),
                               max_size=3)
    if isinstance(t, mi.UnionType):
        return st.one_of(*(from_type_info(u) for u in t.types))
    if isinstance(t, mi.StructType):
        fields = {f.name: from_type_info(f.type) for f in t.fields}
        return st.builds(t.cls, **fields)
    raise NotImplementedError(repr(t))


def events() -> st.SearchStrategy[Any]:
    """Any catalogue event."""
    return from_type_info(mi.type_info(AnyEvent))


def submissions() -> st.SearchStrategy[Submission]:
    """Valid submissions of any catalogue event a publisher may submit."""
    return from_type_info(mi.type_info(Submission)).filter(
        lambda s: tag_of(type(s.event)) not in LEDGER_ONLY and not _by_fiat(s.event))


def _by_fiat(event: Any) -> bool:
    """What only the ledger or a person makes: an outcome or a lesson "in global" (a
    promotion makes it), a lesson "explicit" that no person stated."""
    return (isinstance(event, OutcomeObserved | LessonProposed) and "global" in (
        getattr(event, "project", ""), getattr(event, "scope", ""))) or (
        isinstance(event, LessonProposed) and event.longevity == "explicit"
        and event.source != "user")


def ledger_only_submissions() -> st.SearchStrategy[Submission]:
    """Well-formed submissions of the events only the ledger writes."""
    return from_type_info(mi.type_info(Submission)).filter(
        lambda s: tag_of(type(s.event)) in LEDGER_ONLY)


def required_paths(value: Any, t: mi.Type, path: str = "$") -> list[tuple[str, Any]]:
    """Every (JSON path, value) of a required field inside a builtins value, with its parent."""
    out: list[tuple[str, Any]] = []
    if isinstance(t, mi.UnionType):
        for u in t.types:
            if isinstance(u, mi.StructType) and isinstance(value, dict) and \
                    value.get("type") == u.tag:
                return required_paths(value, u, path)
        return out
    if isinstance(t, mi.StructType):
        for f in t.fields:
            sub = f"{path}.{f.name}"
            if f.required:
                out.append((sub, value))
            out.extend(required_paths(value[f.name], f.type, sub))
    elif isinstance(t, mi.ListType):
        for i, item in enumerate(value):
            out.extend(required_paths(item, t.item_type, f"{path}[{i}]"))
    return out


Step = str | int


def typed_paths(value: Any, t: mi.Type, path: str = "$",
                steps: tuple[Step, ...] = ()) -> list[tuple[str, tuple[Step, ...], Any]]:
    """Every (JSON path as msgspec reports it, steps to reach it, value) inside a value.

    Struct fields are ``.name`` and list items ``[i]``; a mapping's values are reported
    by msgspec as ``[...]``, whatever their key.
    """
    out = [(path, steps, value)]
    if isinstance(t, mi.UnionType):
        for u in t.types:
            if isinstance(u, mi.StructType) and isinstance(value, dict) and \
                    value.get("type", u.tag) == u.tag:
                return out[:0] + typed_paths(value, u, path, steps)
            if isinstance(u, mi.NoneType) and value is None:
                return out
        return out
    if isinstance(t, mi.StructType):
        for f in t.fields:
            if f.name in value:
                out += typed_paths(value[f.name], f.type, f"{path}.{f.name}", (*steps, f.name))
    elif isinstance(t, mi.ListType):
        for i, item in enumerate(value):
            out += typed_paths(item, t.item_type, f"{path}[{i}]", (*steps, i))
    elif isinstance(t, mi.DictType):
        for k, v in value.items():
            out += typed_paths(v, t.value_type, f"{path}[...]", (*steps, k))
    return out


def to_builtins(obj: Any) -> Any:
    """The JSON-shaped form a publisher would send."""
    return msgspec.json.decode(msgspec.json.encode(obj))
