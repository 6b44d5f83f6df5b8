"""Malformed input of any shape gets a typed error naming the field, and writes nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lessonledger.ledger import MAX_BODY_BYTES, BodyTooLargeError, EventLog, InvalidEventError
from lessonledger.ledger.events import ERASED, LEDGER_ONLY, RulesAdopted, tag_of
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.submission import (
    MAX_SUBMISSION_BYTES,
    Submission,
    parse_submission,
    to_new_event,
)
from strategies import (
    ledger_only_submissions,
    required_paths,
    submissions,
    to_builtins,
    typed_paths,
)

SUBMISSION = mi.type_info(Submission)
_STEP = re.compile(r"\.([A-Za-z_]\w*)|\[(\d+)\]")


def _steps(path: str) -> list[str | int]:
    return [name if name else int(index) for name, index in _STEP.findall(path[1:])]


def _parent(doc: Any, path: str) -> tuple[Any, str | int]:
    steps = _steps(path)
    for step in steps[:-1]:
        doc = doc[step]
    return doc, steps[-1]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EventLog]:
    home = acquire(str(tmp_path_factory.mktemp("submissions")), sync=False)
    yield EventLog(home, "ledger")
    release(home)


def _submit(log: EventLog, doc: Any) -> None:
    before = log.head()
    log.append([to_new_event(parse_submission(msgspec.json.encode(doc)))])
    assert log.head() == before + 1


def _refused(log: EventLog, doc: Any) -> InvalidEventError:
    before = log.head()
    with pytest.raises(InvalidEventError) as caught:
        log.append([to_new_event(parse_submission(msgspec.json.encode(doc)))])
    assert log.head() == before, "a refused submission wrote something"
    return caught.value


@given(submissions())
def test_valid_submissions_are_stored(log: EventLog, submission: Submission) -> None:
    _submit(log, to_builtins(submission) | {"event_id": str(uuid4()), "stream": str(uuid4())})


@given(ledger_only_submissions())
def test_an_event_only_the_ledger_writes_is_refused_as_a_submission(
        log: EventLog, submission: Submission) -> None:
    doc = to_builtins(submission) | {"event_id": str(uuid4()), "stream": str(uuid4())}
    refused = _refused(log, doc)
    assert refused.field == "$.event.type"
    assert "only by the ledger" in str(refused)


def test_the_events_only_the_ledger_writes_include_erasure_and_rules() -> None:
    assert {ERASED, tag_of(RulesAdopted)} <= LEDGER_ONLY


@given(submissions(), st.data())
def test_missing_required_field_is_named(log: EventLog, submission: Submission,
                                         data: st.DataObject) -> None:
    doc = to_builtins(submission)
    path, _ = data.draw(st.sampled_from(required_paths(doc, mi.type_info(Submission))))
    parent, key = _parent(doc, path)
    del parent[key]
    assert _refused(log, doc).field == path


def _wrong(value: Any) -> Any:
    return 12345 if isinstance(value, str) else "not-a-value"


@given(submissions(), st.data())
def test_wrong_type_is_named(log: EventLog, submission: Submission, data: st.DataObject) -> None:
    doc = to_builtins(submission)
    path, steps, value = data.draw(st.sampled_from(typed_paths(doc, SUBMISSION)[1:]))
    parent = doc
    for step in steps[:-1]:
        parent = parent[step]
    parent[steps[-1]] = _wrong(value)
    assert _refused(log, doc).field == path


@given(submissions(), st.text(min_size=1, max_size=30))
def test_unknown_tag_is_refused(log: EventLog, submission: Submission, tag: str) -> None:
    doc = to_builtins(submission)
    doc["event"]["type"] = "x-" + tag
    assert _refused(log, doc).field == "$.event.type"


@given(submissions(), st.sampled_from(["unexpected", "body", "position"]))
def test_unknown_field_is_refused(log: EventLog, submission: Submission, name: str) -> None:
    doc = to_builtins(submission)
    doc["event"][name] = 1
    assert _refused(log, doc).field.startswith("$.event")


def test_oversized_body_is_refused_before_parsing(log: EventLog) -> None:
    doc = {"event_id": str(uuid4()), "padding": "x" * (MAX_BODY_BYTES + (64 << 10))}
    err = _refused(log, doc)
    assert isinstance(err, BodyTooLargeError)
    assert err.limit > MAX_BODY_BYTES


def test_body_over_limit_is_refused_after_parsing(log: EventLog) -> None:
    # Op and target within what a view can key by (KEYED_BYTES), the error in two-byte
    # characters, so the body is over its limit and the JSON under the input's.
    ops = [{"op": "o" * 199, "target": "t" * 199, "ok": False, "error": "\u00e9" * 800,
            "order": i} for i in range(500)]
    doc = {"event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
           "occurred_at": "2026-11-29T10:00:00Z", "actor": "agent",
           "event": {"type": "outcome.observed", "outcome_id": str(uuid4()),
                     "project": "a" * 32, "passed": False, "signal": "tool", "operations": ops,
                     "task": "t" * 8192, "in_play": [str(uuid4()) for _ in range(1000)]}}
    assert len(msgspec.json.encode(doc)) < MAX_SUBMISSION_BYTES
    err = _refused(log, doc)
    assert isinstance(err, BodyTooLargeError)
    assert err.field == "$.event"


def test_naive_time_is_refused(log: EventLog) -> None:
    doc = {"event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
           "occurred_at": "2026-11-29T10:00:00", "actor": "agent",
           "event": {"type": "fact.consumer", "key": "k", "tool": "t"}}
    assert "time zone" in str(_refused(log, doc))


def test_not_json_is_refused(log: EventLog) -> None:
    before = log.head()
    with pytest.raises(InvalidEventError):
        parse_submission(b"{not json")
    assert log.head() == before
