"""Actor binding and raw write paths (attack16, second round): the tests of the defects
failed on 0504652 (a client-chosen actor on submissions and query records, names and
scopes unscreened at append and import, joined credentials in check records and outcome
statistics, an 800-byte actor breaking every close); the rest held then."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any
from uuid import uuid4

import _attack16_paths  # noqa: F401  (first: puts hubtools on the path)
import msgspec
import pytest
from hubtools import HubProcess, curve_hub
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.sync import RemoteLedger

P = "3f9a0c1b2d4e5f60"
GHP = "ghp_" + "Zq7Xk2Lm9Pw4Rt6Yb1Nc8Vd3Hs5Jf0Ga2Ke7"  # GitHub token shape


def _home_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())


def _submission(actor: str, event: dict[str, Any]) -> bytes:
    return msgspec.json.encode({
        "event_id": str(uuid4()), "stream": str(uuid4()), "version": 0,
        "occurred_at": "2026-12-01T12:00:00Z", "actor": actor, "event": event})


def _outcome_event() -> dict[str, Any]:
    return {"type": "outcome.observed", "outcome_id": str(uuid4()), "project": P,
            "passed": True, "signal": "verification",
            "task": "wes private task brindlemoor"}


# -- 1. actor binding ------------------------------------------------------------------------


def test_hub_submission_actor_is_bound_to_the_key(tmp_path: Path) -> None:
    """A key submits a raw event naming another person as actor."""
    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P], "write": [P]}),
        "writer": ("wes", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path, grants, admin="admin") as (server, keys), \
            keys.client(server, "writer") as wes:
        receipt = wes.submit(_submission("alice", _outcome_event()))
        (record,) = wes.read_log(receipt.positions[0], 1)
    assert record.envelope.principal == "wes"
    assert record.envelope.actor in ("wes", "agent"), record.envelope.actor


def test_keyless_hub_submission_actor_is_the_operator(tmp_path: Path) -> None:
    home = tmp_path / "home"
    server = HubProcess(home, tmp_path / "hub.log", "--principal", "operator")
    server.start()
    try:
        with RemoteLedger(server.endpoint, timeout=5.0) as client:
            receipt = client.submit(_submission("alice", _outcome_event()))
            (record,) = client.read_log(receipt.positions[0], 1)
    finally:
        server.kill()
    assert record.envelope.principal == "operator"
    assert record.envelope.actor in ("operator", "agent"), record.envelope.actor


# -- 2. raw write paths ----------------------------------------------------------------------


def _fact_new_event(**envelope: Any) -> Any:
    from lessonledger.ledger.events import FactLearned
    from lessonledger.ledger.submission import new_event

    event = FactLearned(fact_id=uuid4(), key="python", value="3.11", scope="global")
    made = new_event(event, stream=event.fact_id, version=0, event_id=uuid4(),
                     actor="agent-7")
    return msgspec.structs.replace(made, **envelope)


def _append(home: Path, events: list[Any]) -> list[int]:
    from lessonledger.commands import open_ledger

    with open_ledger(home, sync=False):
        pass  # a home
    lmdb_home = acquire(str(home), sync=False)
    try:
        return [int(p) for p in EventLog(lmdb_home, LOG_NAME).append(events)]
    finally:
        release(lmdb_home)


def test_eventlog_append_screens_the_envelope_scope(tmp_path: Path) -> None:
    """README: EventLog.append screens catalogue events; the envelope outlives erasure."""
    from lessonledger.ledger.errors import CredentialEventError

    home = tmp_path / "home"
    with pytest.raises(CredentialEventError):
        _append(home, [_fact_new_event(scope=GHP)])
    assert GHP.encode() not in _home_bytes(home)


def test_eventlog_append_screens_a_string_stream_id(tmp_path: Path) -> None:
    from lessonledger.ledger.errors import CredentialEventError, InvalidEventError

    home = tmp_path / "home"
    with pytest.raises((CredentialEventError, InvalidEventError)):
        _append(home, [_fact_new_event(stream=f"stream-{GHP}")])
    assert GHP.encode() not in _home_bytes(home)


def test_eventlog_append_screens_names_of_an_application_event(tmp_path: Path) -> None:
    """An eventsourcing-style event of a type of its own, with a token as its actor: the
    envelope's names go into the ledger's audit index and outlive any erasure."""
    from lessonledger.ledger.errors import CredentialEventError

    home = tmp_path / "home"
    with pytest.raises(CredentialEventError):
        _append(home, [_fact_new_event(type="myapp.Thing", payload=b"{}", actor=GHP)])
    assert GHP.encode() not in _home_bytes(home)


def _cli(*args: str) -> int:
    from lessonledger.ops.cli import main

    return main(list(args))


def test_import_screens_names_of_an_envelope_only_record(tmp_path: Path) -> None:
    """A home that took a token as an actor by a path that did not screen it (an older
    ledger; here code's append_decided), then erased the record's body: its export's
    envelope-only record still carries the token, and import brings it into a new home."""
    from lessonledger.commands import open_ledger
    from lessonledger.ledger.events import OutcomeObserved
    from lessonledger.ledger.submission import new_event

    src, out, dst = tmp_path / "src", tmp_path / "x.jsonl", tmp_path / "dst"
    with open_ledger(src, sync=False):
        pass
    event = OutcomeObserved(outcome_id=uuid4(), project=P, passed=True,
                            signal="verification")
    made = new_event(event, stream=event.outcome_id, version=0, event_id=uuid4(),
                     actor=GHP, principal="zed")
    lmdb_home = acquire(str(src), sync=False)
    try:
        EventLog(lmdb_home, LOG_NAME).append_decided([made])
    finally:
        release(lmdb_home)
    with open_ledger(src, sync=False) as ledger:
        ledger.erase(key="e1", what="principal", subject="zed", reason="asked")
    assert _cli("--home", str(src), "export", "--include-envelopes", "-o", str(out)) == 0
    assert GHP.encode() in out.read_bytes()  # the control: the envelope keeps it
    code = _cli("import", str(out), "--into", str(dst))
    assert code != 0, "import took an envelope whose actor is a GitHub token"
    assert not dst.exists() or GHP.encode() not in _home_bytes(dst)


def test_import_screens_the_envelope_scope(tmp_path: Path) -> None:
    """Same, by the envelope's scope (which neither append nor import screens)."""
    from lessonledger.commands import open_ledger

    src, out, dst = tmp_path / "src", tmp_path / "x.jsonl", tmp_path / "dst"
    with open_ledger(src, sync=False):
        pass
    lmdb_home = acquire(str(src), sync=False)
    try:
        # Unscreened, as a ledger from before append screened names stored it.
        EventLog(lmdb_home, LOG_NAME).append_decided([_fact_new_event(scope=GHP)])
    finally:
        release(lmdb_home)
    assert _cli("--home", str(src), "export", "--include-envelopes", "-o", str(out)) == 0
    code = _cli("import", str(out), "--into", str(dst))
    assert code != 0, "import took an envelope whose scope is a GitHub token"


def test_hub_recall_record_actor_is_bound_to_the_key(tmp_path: Path) -> None:
    """A recall over the hub is recorded (lesson.recalled): its actor is the client's."""
    import time

    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P], "write": [P]}),
        "writer": ("wes", {"read": [P], "write": [P]})}
    query = "deploy with quill-new to prod"

    def prepare(ledger: Any) -> None:
        from lessonledger.commands import Operation

        outcome = ledger.observe_outcome(
            key="t-o", principal="pat", project=P, passed=True, operations=[
                Operation(op="quill-old", target="prod", ok=False, error="refused", order=0),
                Operation(op="quill-new", target="prod", ok=True, order=1)])
        ledger.propose_lesson(
            key="t-l", principal="pat", project=P, kind="prefer",
            text="deploy with quill-new", avoid_op="quill-old", prefer_op="quill-new",
            target="prod", source="user", evidence=[outcome.ids["outcome_id"]])

    with curve_hub(tmp_path, grants, admin="admin", prepare=prepare) as (server, keys), \
            keys.client(server, "writer") as wes:
        head = wes.head()
        assert wes.recall(P, query, actor="alice").lessons
        wes.lessons(P, actor="alice")
        deadline = time.monotonic() + 30
        recorded: list[Any] = []
        while time.monotonic() < deadline and len(recorded) < 2:
            recorded = [r for r in wes.read_log(head + 1, 1000)
                        if r.envelope.principal == "wes"]
            time.sleep(0.3)
    assert recorded, "the control: the queries were recorded"
    actors = {(r.envelope.type, r.envelope.principal, r.envelope.actor) for r in recorded}
    assert all(actor in ("wes", "agent") for _, _, actor in actors), actors


def test_ledger_record_screens_its_actor(tmp_path: Path) -> None:
    """Ledger.record (public, for bookkeeping events) screens the body, not the actor."""
    from lessonledger.commands import open_ledger
    from lessonledger.commands.errors import CredentialError
    from lessonledger.ledger.events import FactLearned

    home = tmp_path / "home"
    event = FactLearned(fact_id=uuid4(), key="python", value="3.11", scope="global")
    with open_ledger(home, sync=False) as ledger, pytest.raises(CredentialError):
        ledger.record(lambda _: [event], actor=GHP)
    assert GHP.encode() not in _home_bytes(home)


# -- 3. secrets reaching the home ------------------------------------------------------------


def test_check_record_does_not_join_fields_into_a_credential(tmp_path: Path) -> None:
    """check() screens operation and target one by one, then records the query as
    f"check {operation} {target}": `--password VALUE`, a credential by the ledger's own
    detector, lands in data.mdb verbatim."""
    from lessonledger.commands import Operation, open_ledger
    from lessonledger.commands.errors import CredentialError
    from lessonledger.ledger.secrets import credential_in

    value = "Zx9qLm2Pw7Kd"
    joined = f"check --password {value}"
    assert credential_in("--password") is None
    assert credential_in(value) is None
    assert credential_in(joined) is not None  # the control: the join is a credential
    home = tmp_path / "home"
    with open_ledger(home, sync=False) as ledger:
        # Outcome statistics key op and target joined: such an outcome is refused too.
        with pytest.raises(CredentialError):
            ledger.observe_outcome(key="o", project=P, passed=True, operations=[
                Operation(op="--passwd", target=value, ok=False, error="refused", order=0),
                Operation(op="--password", target=value, ok=True, order=1)])
        ledger.propose_lesson(
            key="l", project=P, kind="do", text="use the long flag",
            prefer_op="--password", target=value, source="user")
        with pytest.raises(CredentialError):
            ledger.check(P, "--password", value)
        ledger.check(P, "--password", value, record=False)  # unrecorded: nothing joined
    assert joined.encode() not in _home_bytes(home)


def test_outcome_stats_does_not_join_op_and_target_into_a_credential(tmp_path: Path) -> None:
    """An outcome's op `--password` and target VALUE each pass the screen; the outcome
    stats view keys the operation as f"{op} {target}" and saves `--password VALUE`
    (the command-line credential the detector refuses) into data.mdb."""
    from lessonledger.commands import Operation, open_ledger
    from lessonledger.commands.errors import CredentialError

    value = "Zx9qLm2Pw7Kd"
    home = tmp_path / "home"
    with open_ledger(home, sync=False) as ledger:
        with pytest.raises(CredentialError):
            ledger.observe_outcome(key="o", project=P, passed=True, operations=[
                Operation(op="--password", target=value, ok=True)])
        assert f"--password {value}" not in ledger.outcome_stats(P).operations
    assert f"--password {value}".encode() not in _home_bytes(home)


def test_hub_admin_submission_cannot_name_another_as_decider(tmp_path: Path) -> None:
    """attack16 bound who erased to the admin's key; a raw delta.rejected submitted by an
    admin key still records any `by` (a person the body names: export --principal shows
    it) and any actor."""
    from lessonledger.ledger.events import decode_event

    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P], "write": [P]})}
    with curve_hub(tmp_path, grants, admin="admin") as (server, keys), \
            keys.client(server, "admin") as root:
        root.skills.register("triage", "# Triage\n\n## Drafting replies\nBe kind.\n")
        staged = root.skills.propose(
            "triage", tier=3, kind="preference", anchor="drafting-replies",
            provenance="user_instruction", payload="Keep declines short.", key="p-1")
        receipt = root.submit(_submission("mallory", {
            "type": "delta.rejected", "delta_id": str(staged.ids["delta_id"]),
            "by": "mallory",
            "reason": "nope"}))
        (record,) = root.read_log(receipt.positions[0], 1)
    assert record.payload is not None
    body: Any = decode_event(record.payload)
    assert (record.envelope.actor, body.by) == ("root", "root"), (record.envelope.actor,
                                                                  body.by)


# -- 4. a 200-character name that the audit index cannot key ----------------------------------

WIDE = "\U0001F600" * 200  # 200 characters, 800 bytes of UTF-8: over LMDB's 511-byte key


def test_a_wide_actor_does_not_break_every_later_close(tmp_path: Path) -> None:
    """Names are capped at 200 characters "so the audit index can key them"; the actor
    is not held to KEYED_BYTES (principal and session are), and the audit index keys
    it: 800 bytes is over LMDB's key limit."""
    from lessonledger.commands import open_ledger
    from lessonledger.commands.errors import InvalidCommandError

    home = tmp_path / "home"
    try:
        with open_ledger(home, sync=False) as ledger, \
                contextlib.suppress(InvalidCommandError):  # refused: fine
            ledger.observe_outcome(key="o", project=P, passed=True, actor=WIDE)
    except Exception as e:
        pytest.fail(f"close after a wide actor raised {type(e).__name__}: {e}")
    with open_ledger(home, sync=False) as ledger:  # and every later one
        ledger.observe_outcome(key="o2", project=P, passed=True)


def test_a_wide_actor_submitted_to_a_hub_does_not_break_it(tmp_path: Path) -> None:
    from lessonledger.commands import open_ledger

    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P], "write": [P]}),
        "writer": ("wes", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path, grants, admin="admin") as (server, keys), \
            keys.client(server, "writer") as wes:
        with contextlib.suppress(Exception):  # refused: fine
            wes.submit(_submission(WIDE, _outcome_event()))
        wes.observe_outcome(key="after", project=P, passed=True)
        code = server.terminate(timeout=60)
    log = (tmp_path / "hub.log").read_text()
    assert code == 0, log[-3000:]
    assert "BadValsize" not in log, log[-3000:]
    with open_ledger(tmp_path / "home", sync=False) as ledger:
        ledger.observe_outcome(key="o2", project=P, passed=True)


def test_eventsourcing_recorder_with_a_catalogue_topic_is_screened(tmp_path: Path) -> None:
    """An eventsourcing application on our LMDB module whose stored event's topic is a
    catalogue tag, its state a valid catalogue body holding a token (held if refused)."""
    from eventsourcing.persistence import StoredEvent
    from lessonledger.ledger.errors import CredentialEventError
    from lessonledger.ledger.events import FactLearned, encode_event
    from lessonledger.ledger.lmdb_recorders import LMDBApplicationRecorder

    home = tmp_path / "home"
    event = FactLearned(fact_id=uuid4(), key="token", value=GHP, scope="global")
    lmdb_home = acquire(str(home), sync=False)
    try:
        recorder = LMDBApplicationRecorder(lmdb_home, LOG_NAME)
        with pytest.raises(CredentialEventError):
            recorder.insert_events([StoredEvent(uuid4(), 1, "fact.learned",
                                                encode_event(event))])
    finally:
        release(lmdb_home)
    assert GHP.encode() not in _home_bytes(home)


def test_ledger_execute_each_screens_a_hand_built_submission(tmp_path: Path) -> None:
    """Ledger.execute_each takes raw Submissions; one built by hand skips
    parse_submission's credential screen ("One built by hand has not been through
    parse_submission's door": ledger_only and overlong are re-checked, credentials not),
    and goes through Writing.append, which does not screen either."""
    from datetime import UTC, datetime

    from lessonledger.commands import open_ledger
    from lessonledger.ledger.events import FactLearned, OutcomeObserved
    from lessonledger.ledger.submission import Submission

    home = tmp_path / "home"
    fact = FactLearned(fact_id=uuid4(), key="token", value=GHP, scope="global")
    outcome = OutcomeObserved(outcome_id=uuid4(), project=P, passed=True,
                              signal="verification")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    items = [Submission(event_id=uuid4(), stream=uuid4(), version=0, occurred_at=now,
                        actor="agent", event=fact),
             Submission(event_id=uuid4(), stream=uuid4(), version=0, occurred_at=now,
                        actor=GHP, event=outcome)]
    with open_ledger(home, sync=False) as ledger:
        results = ledger.execute_each(items)
    assert all(isinstance(r, Exception) for r in results), results
    assert GHP.encode() not in _home_bytes(home)


Q = "9b8a7c6d5e4f3021"


def test_hub_submission_cannot_squat_another_projects_lesson_stream(tmp_path: Path) -> None:
    """wes (write on P only) submits an event of his own project into the stream of a
    lesson of project Q, at its next version: Q's lesson can then no longer be edited."""
    from lessonledger.commands import Operation

    lesson_ids: list[Any] = []

    def prepare(ledger: Any) -> None:
        outcome = ledger.observe_outcome(
            key="t-o", principal="pat", project=Q, passed=True, operations=[
                Operation(op="quill-old", target="prod", ok=False, error="refused", order=0),
                Operation(op="quill-new", target="prod", ok=True, order=1)])
        ledger.propose_lesson(
            key="t-l", principal="pat", project=Q, kind="prefer",
            text="deploy with quill-new", avoid_op="quill-old", prefer_op="quill-new",
            target="prod", source="user", evidence=[outcome.ids["outcome_id"]])
        lesson_ids.append(next(
            row.lesson_id for row in ledger.catalogue(Q, everything=True)
            if row.prefer_op == "quill-new" and row.status != "superseded"))

    grants: dict[str, tuple[str, dict[str, Any]]] = {
        "admin": ("root", {"admin": True, "read": [P, Q], "write": [P, Q]}),
        "writer": ("wes", {"read": [P], "write": [P]})}
    with curve_hub(tmp_path, grants, admin="admin", prepare=prepare) as (server, keys):
        (lesson_id,) = lesson_ids
        with keys.client(server, "admin") as root:
            version = max((r.envelope.version for r in root.read_log(1, 1000)
                           if r.envelope.stream_id == lesson_id), default=-1)
        with keys.client(server, "writer") as wes:
            {r.envelope.stream_id for r in wes.read_log(1, 1000)}
            squat = msgspec.json.encode({
                "event_id": str(uuid4()), "stream": str(lesson_id), "version": version + 1,
                "occurred_at": "2026-12-01T12:00:00Z", "actor": "agent",
                "event": _outcome_event()})
            with contextlib.suppress(Exception):  # refused: fine
                wes.submit(squat)
        with keys.client(server, "admin") as root:
            try:
                root.edit_lesson(key="edit-1", lesson_id=lesson_id,
                                 text="deploy with quill-new, always")
            except Exception as e:
                pytest.fail(f"Q's admin cannot edit Q's lesson after wes's squat: {e!r}")
    assert True


def test_a_wide_grantee_principal_does_not_break_every_later_close(tmp_path: Path) -> None:
    """GrantAccess.principal is Principal (200 characters, no byte bound); the access
    and audit views key it."""
    from lessonledger.commands import open_ledger
    from lessonledger.commands.access import GrantAccess
    from lessonledger.commands.errors import InvalidCommandError
    from lessonledger.sync.keys import load_public, new_keys

    new_keys(tmp_path, "k")
    home = tmp_path / "home"
    try:
        with open_ledger(home, sync=False) as ledger, \
                contextlib.suppress(InvalidCommandError):  # refused: fine
            ledger.execute(GrantAccess(key="g", key_name="k", principal=WIDE,
                                       public_key=load_public(tmp_path / "k.key").decode(),
                                       read=[P], write=[P]))
    except Exception as e:
        pytest.fail(f"close after a wide grantee raised {type(e).__name__}: {e}")
