"""Hostile files given to ``lessonledger import`` (wave 3, attack3).

The chain has no key: whoever writes the file can recompute every commitment and link.
What refuses a forgery is what the stored events themselves must say. Each forgery here
keeps a consistent chain, and must still be a one-line typed refusal (exit code 2) that
leaves the target as it was.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lessonledger.ledger.envelope import Envelope, chain_link, decode_envelope, encode_envelope
from lessonledger.ledger.events import LESSON_PROPOSED, OUTCOME_OBSERVED
from lessonledger.ops.export_format import HEADER_KEY, Row, Stored, event_line
from test_export import _fill, _refused, lines, run


@pytest.fixture
def small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An export, with envelopes, of a small home in which alice's data was erased."""
    home = tmp_path / "home"
    _fill(home, [("outcome", "alice", "agent", 0), ("outcome", "bob", "agent", 1),
                 ("erase", "alice", "operator", 0), ("outcome", "bob", "agent", 0)])
    out = tmp_path / "small.jsonl"
    assert run(capsys, "--home", home, "export", "--include-envelopes", "-o", out)[0] == 0
    return out


Body = Callable[[dict[str, Any], bytes | None], bytes | None]


def _reforged(path: Path, change: Body, name: str = "reforged.jsonl", *,
              envelopes: Callable[[Envelope, dict[str, Any]], Envelope] | None = None
              ) -> Path:
    """The export with stored bodies changed and every commitment and link recomputed.

    ``change(event, body)`` gets each line and its stored body (``salt ‖ payload``) and
    returns the body to store; ``envelopes(envelope, event)``, if given, may change the
    envelope first (and mark the event ``_foreign`` for ``change`` to see). The readable
    fields are rewritten from the new body, so only the stored form can give the
    forgery away.
    """
    header, *events = lines(path)
    previous = bytes(32)
    for event in events:
        stored = event["stored"]
        body = base64.b64decode(stored["body"]) if stored["body"] is not None else None
        envelope = decode_envelope(base64.b64decode(stored["envelope"]))
        if envelopes is not None:
            changed = envelopes(envelope, event)
            event["_foreign"] = changed != envelope
            envelope = changed
        new = change(event, body)
        if new is not None:
            envelope = msgspec.structs.replace(envelope,
                                               commitment=hashlib.sha256(new).digest())
        raw = encode_envelope(envelope)
        previous = chain_link(previous, raw)
        row = Row(envelope, Stored(raw, previous, new))
        try:
            event.clear()
            event.update(msgspec.json.decode(msgspec.json.encode(
                event_line(row, envelopes=True))))
        except (msgspec.DecodeError, ValueError):
            # No readable form of a body that is no event: the stored form alone.
            event.update(position=envelope.position, type=envelope.type,
                         stored=msgspec.to_builtins(row.stored))
    header[HEADER_KEY]["chain"] = previous.hex()
    forged = path.with_name(name)
    forged.write_text("".join(json.dumps(e) + "\n" for e in [header, *events]))
    return forged


def _first(kind: str) -> Callable[[dict[str, Any]], bool]:
    seen: list[int] = []

    def pick(event: dict[str, Any]) -> bool:
        if event["type"] != kind or event["stored"]["body"] is None or seen:
            return False
        seen.append(event["position"])
        return True
    return pick


def test_the_reforging_helper_makes_an_export_that_imports(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = _reforged(small, lambda event, body: body)
    assert run(capsys, "import", same, "--into", tmp_path / "same")[0] == 0


def test_a_body_that_is_no_event_is_refused(small: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    pick = _first(OUTCOME_OBSERVED)
    forged = _reforged(small, lambda event, body: (
        body[:16] + b"\xc1 not msgpack" if body is not None and pick(event) else body))
    _refused(capsys, forged, tmp_path / "new", "does not decode")


def test_a_body_of_another_type_than_its_envelope_is_refused(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lesson smuggled under an outcome's envelope: the views would fold it as a lesson,
    while erasure, export selections and grants look at the envelope's type."""
    _, *events = lines(small)
    lesson = next(base64.b64decode(e["stored"]["body"]) for e in events
                  if e["type"] == LESSON_PROPOSED and e["stored"]["body"] is not None)
    pick = _first(OUTCOME_OBSERVED)
    forged = _reforged(small, lambda event, body: (
        body[:16] + lesson[16:] if body is not None and pick(event) else body))
    _refused(capsys, forged, tmp_path / "new", LESSON_PROPOSED, OUTCOME_OBSERVED)


def test_a_body_past_the_catalogue_bounds_is_refused_with_its_line(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pick = _first(OUTCOME_OBSERVED)

    def long_task(event: dict[str, Any], body: bytes | None) -> bytes | None:
        if body is None or not pick(event):
            return body
        fields = msgspec.msgpack.decode(body[16:])
        fields["task"] = "x" * 100_000
        return body[:16] + msgspec.msgpack.encode(fields)

    _refused(capsys, _reforged(small, long_task), tmp_path / "new", "line ", "$.task")


def test_a_body_dropped_without_an_erasure_is_refused(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The new home would verify as damaged: the file promises a home that verifies."""
    pick = _first(OUTCOME_OBSERVED)
    forged = _reforged(small, lambda event, body: None if pick(event) else body)
    _refused(capsys, forged, tmp_path / "new", "no erasure in the export names it")


def test_bad_utf8_in_an_event_line_is_refused(small: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rows = small.read_bytes().splitlines(keepends=True)
    rows[2] = rows[2].replace(b'"actor": "', b'"actor": "\xff\xfe', 1).replace(
        b'"actor":"', b'"actor":"\xff\xfe', 1)
    assert b"\xff\xfe" in rows[2]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(rows))
    _refused(capsys, bad, tmp_path / "new", "line 3")


def test_a_line_far_past_any_event_is_refused_without_reading_it_whole(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = small.read_bytes().splitlines(keepends=True)
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as f:
        f.write(rows[0])
        f.write(b'{"position": 1, "pad": "')
        f.write(b"x" * (64 << 20))
        f.write(b'"}\n')
    _refused(capsys, huge, tmp_path / "new", "line 2", "longer than")


def test_another_applications_event_in_the_ledgers_namespaces_is_passed_over(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An event whose type only looks like ours (``outcome.custom``), with a body that is
    none of ours: it imports as another application's event, and no view folds it."""
    pick = _first(OUTCOME_OBSERVED)

    def foreign(envelope: Envelope, event: dict[str, Any]) -> Envelope:
        return msgspec.structs.replace(envelope, type="outcome.custom") if pick(event) \
            else envelope

    forged = _reforged(small, lambda event, body: (
        body[:16] + b"\xc1 theirs" if body is not None and event.get("_foreign") else body),
        envelopes=foreign)
    code, _, err = run(capsys, "import", forged, "--into", tmp_path / "new")
    assert code == 0, err
    code, out, _ = run(capsys, "--home", tmp_path / "new", "verify")
    assert code == 0, out
