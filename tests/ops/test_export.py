"""``lessonledger export`` and ``import``: a home's events out as JSON lines, and back.

The round trip is run on a home of over 10,000 events (a trap-world run, then an erasure,
so erased bodies travel too): the imported home answers every query as the source does.
The subject-access export is checked against an oracle that knows nothing of the event
catalogue's traits: an event names P when its envelope's principal or actor is P or when
P is a string anywhere in its body. Bad input is refused in one line, exit code 2, and
the target is left as it was.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect
import pytest
import zmq
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lessonledger.commands.access import GrantAccess
from lessonledger.commands.erasure import NothingToEraseError
from lessonledger.commands.ledger import open_ledger
from lessonledger.commands.messages import Operation
from lessonledger.ledger.envelope import chain_link, decode_envelope, encode_envelope
from lessonledger.ledger.events import EVENT_CLASSES, NAMES_A_PERSON, tag_of
from lessonledger.ops.bench.trapworld import World, WorldConfig
from lessonledger.ops.bench.trapworld_bench import run_arm
from lessonledger.ops.cli import main
from lessonledger.ops.export_format import HEADER_KEY

PROJECTS = ("a" * 32, "b" * 32)
QUERIES = ("run the tests", "build the docs", "format the code", "install the deps")


def run(capsys: pytest.CaptureFixture[str] | None, *argv: object) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse refusing an argument
        code = int(e.code or 0)
    if capsys is None:
        return code, "", ""
    out, err = capsys.readouterr()
    return code, out, err


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trap-world home of over 10,000 events, one of its sessions erased."""
    home = tmp_path_factory.mktemp("big") / "home"
    figures = run_arm(World.generate(WorldConfig(projects=12, sessions=110)), "memory", home)
    assert figures["events"] >= 10_000
    with open_ledger(home, sync=False) as ledger:
        session = next(r.envelope.session for r in ledger.log.scan() if r.envelope.session)
        ledger.erase(what="session", subject=session, reason="test", key="erase-1")
    return home


def test_a_10k_event_home_round_trips(big: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    exported, new = tmp_path / "all.jsonl", tmp_path / "new"
    code, out, err = run(capsys, "--home", big, "export", "--include-envelopes", "-o", exported)
    assert code == 0, err
    code, out, err = run(capsys, "import", exported, "--into", new, "--json")
    assert code == 0, err
    result = json.loads(out)
    head = int(json.loads(run(capsys, "--home", big, "stats", "--json")[1])["head"])
    assert (result["events"], result["head"], result["whole"]) == (head, head, True)
    assert head > 10_000

    def ask(home: Path, *argv: object) -> str:
        code, out, err = run(capsys, "--home", home, *argv)
        assert code == 0, err
        return out

    listed = ask(big, "lessons", "list", "--all", "--json")
    assert len(listed.splitlines()) == result["lessons"] > 50
    assert ask(new, "lessons", "list", "--all", "--json") == listed
    rows = [json.loads(line) for line in listed.splitlines()]
    projects = sorted({r["scope"] for r in rows} - {"global"})
    assert len(projects) == 12
    shown = 0
    # Each answer at --as-of replays the log afresh: a few projects and queries suffice.
    for project in projects[:5]:
        for query in QUERIES[:2]:
            # At the head: a live recall's recency moves with the wall clock, in both.
            argv = ("recall", "--project", project, query, "--as-of", head, "--no-record",
                    "--json")
            answer = ask(big, *argv)
            shown += len(json.loads(answer)["lessons"])
            assert ask(new, *argv) == answer
    assert shown > 10, "the answers compared hold lessons"
    for row in rows[:10]:
        assert ask(new, "why", row["lesson_id"], "--json") == ask(big, "why", row["lesson_id"],
                                                                   "--json")
    stats = [json.loads(ask(h, "stats", "--json")) for h in (big, new)]
    assert stats[0]["erased_bodies"] > 0, "the erased session's bodies travelled as erased"
    assert [(s["events_by_type"], s["erased_bodies"]) for s in stats] == [
        (stats[0]["events_by_type"], stats[0]["erased_bodies"])] * 2
    assert json.loads(ask(new, "verify", "--json"))["ok"] is True
    again = tmp_path / "again.jsonl"
    assert run(capsys, "--home", new, "export", "--include-envelopes", "-o", again)[0] == 0
    # Link for link the source's log: the same lines, the header's time aside.
    assert lines(again)[1:] == lines(exported)[1:]
    assert lines(again)[0][HEADER_KEY]["chain"] == lines(exported)[0][HEADER_KEY]["chain"]


def test_every_line_is_one_event_with_iso_times_and_erased_bodies_as_erased(
        big: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "e.jsonl"
    assert run(capsys, "--home", big, "export", "--to", 300, "-o", out)[0] == 0
    header, *events = lines(out)
    assert header[HEADER_KEY]["selection"] == {"to": 300}
    assert [e["position"] for e in events] == list(range(1, 301))
    for event in events:
        assert "stored" not in event
        for name in ("recorded_at", "occurred_at"):
            iso, ns = event[name], event[f"{name}_ns"]
            assert iso.endswith("+00:00")
            assert iso[:19] == _iso(ns)[:19]
            assert int(iso[20:26]) == ns // 1000 % 1_000_000, "microseconds, exact"
    erased = [e for e in events if e["body"] == "erased"]
    assert erased, "the fixture's erasure took early events"
    assert all(isinstance(e["body"], dict) for e in events if e not in erased)


def _iso(ns: int) -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)).isoformat()


# -- a subject-access export ------------------------------------------------------------

PEOPLE = ("alice", "bob", "carol")
Step = tuple[str, str, str, int]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _names(event: dict[str, Any], person: str) -> bool:
    """The oracle: P is the envelope's principal or actor, or any string in the body."""
    return person in (event["principal"], event["actor"]) or (
        event["body"] != "erased" and person in set(_strings(event["body"])))


def _fill(home: Path, steps: list[Step]) -> None:
    with open_ledger(home, sync=False) as ledger:
        ledger.skills.register("triage", "# Triage\n\n## Ranking\n\nRank.\n", tools=["search"],
                               key="reg")
        for i, (kind, principal, actor, project) in enumerate(steps):
            fields = {"key": f"k{i}", "principal": principal, "actor": actor,
                      "session": f"session-{i % 3}"}
            if kind == "outcome":
                ledger.observe_outcome(project=PROJECTS[project], passed=True, operations=[
                    Operation(op="pytest:tests/", target="tests", ok=False, error="no conftest"),
                    Operation(op="pytest:root", target="tests", ok=True, order=1)], **fields)
            elif kind == "delta":
                delta = ledger.skills.propose("triage", tier=3, kind="caveat", anchor="ranking",
                                              payload="Rank the oldest first.",
                                              provenance="user_instruction", **fields)
                ledger.skills.approve([delta.ids["delta_id"]], **{**fields, "key": f"a{i}"})
            elif kind == "grant" and principal:
                ledger.execute(GrantAccess(key=fields["key"], key_name=f"key-{i}",
                                           public_key=zmq.curve_keypair()[0].decode(),
                                           principal=principal, actor=actor, read=[PROJECTS[0]]))
            elif kind == "erase" and principal:
                with contextlib.suppress(NothingToEraseError):
                    ledger.erase(what="principal", subject=principal, reason="asked",
                                 key=fields["key"], actor=actor)


_steps = st.lists(st.tuples(st.sampled_from(["outcome", "outcome", "delta", "grant", "erase"]),
                            st.sampled_from(["", *PEOPLE]),
                            st.sampled_from(["agent", "operator", *PEOPLE]),
                            st.integers(0, 1)), min_size=1, max_size=8)


@settings(max_examples=12)
@given(steps=_steps)
@example(steps=[("outcome", "alice", "agent", 0), ("delta", "bob", "carol", 1),
                ("grant", "carol", "operator", 0), ("erase", "alice", "operator", 0),
                ("outcome", "bob", "alice", 1)])
def test_a_principal_export_holds_every_event_naming_them_and_nothing_else(
        steps: list[Step]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        _fill(home, steps)
        everything = Path(tmp) / "all.jsonl"
        assert run(None, "--home", home, "export", "-o", everything)[0] == 0
        _, *events = lines(everything)
        for person in (*PEOPLE, "nobody"):
            out = Path(tmp) / f"{person}.jsonl"
            assert run(None, "--home", home, "export", "--principal", person, "-o", out)[0] == 0
            header, *got = lines(out)
            assert header[HEADER_KEY]["selection"] == {"principal": person}
            assert got == [e for e in events if _names(e, person)], person
        for erasure in (e for e in events if e["type"] == "erasure.erased"):
            person = erasure["body"]["subject"]
            # An erasure of P takes what P wrote as actor too (attack11b), so P's own
            # events are those naming P in their envelope either way.
            own = [e for e in lines(Path(tmp) / f"{person}.jsonl")[1:]
                   if person in (e["principal"], e["actor"])
                   and e["position"] < erasure["position"]]
            assert own
            assert all(e["body"] == "erased" for e in own), "never resurrected"


def test_events_whose_bodies_name_people_declare_it() -> None:
    # A new event with a person in a field of its own must say so, or a subject-access
    # export would miss it.
    people = {"by", "subject", "principal", "actor", "who", "user"}
    for cls in EVENT_CLASSES:
        info = msgspec.inspect.type_info(cls)
        assert isinstance(info, msgspec.inspect.StructType)
        named = {f.name for f in info.fields if isinstance(f.type, msgspec.inspect.StrType)}
        assert (tag_of(cls) in NAMES_A_PERSON) == bool(named & people), cls.__name__


# -- import: what it refuses ------------------------------------------------------------


@pytest.fixture
def small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """An export, with envelopes, of a small home in which alice's data was erased."""
    home = tmp_path / "home"
    _fill(home, [("outcome", "alice", "agent", 0), ("outcome", "bob", "agent", 1),
                 ("erase", "alice", "operator", 0), ("outcome", "bob", "agent", 0)])
    out = tmp_path / "small.jsonl"
    assert run(capsys, "--home", home, "export", "--include-envelopes", "-o", out)[0] == 0
    return out


def _refused(capsys: pytest.CaptureFixture[str], export: Path, into: Path,
             *words: str) -> None:
    before = sorted(into.iterdir()) if into.exists() else None
    code, out, err = run(capsys, "import", export, "--into", into)
    assert (code, out) == (2, ""), err
    assert len(err.strip().splitlines()) == 1, err
    assert "nothing was written" in err, err
    for word in words:
        assert word in err, err
    assert (sorted(into.iterdir()) if into.exists() else None) == before, "target untouched"


def _edit(path: Path, index: int, change: Any) -> Path:
    rows = path.read_text().splitlines(keepends=True)
    rows[index] = change(rows[index])
    edited = path.with_name(f"edited-{index}.jsonl")
    edited.write_text("".join(rows))
    return edited


def test_an_erasure_of_a_principal_is_in_their_export_though_its_envelope_is_not_theirs(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "alice.jsonl"
    assert run(capsys, "--home", tmp_path / "home", "export", "--principal", "alice",
               "-o", out)[0] == 0
    _, *got = lines(out)
    erasure = [e for e in got if e["type"] == "erasure.erased"]
    assert [(e["actor"], e["principal"], e["body"]["subject"]) for e in erasure] == [
        ("operator", "", "alice")]
    assert {e["principal"] for e in got if e not in erasure} == {"alice"}
    assert all(e["body"] == "erased" for e in got if e not in erasure)


def test_a_whole_export_imports_and_verifies(small: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "import", small, "--into", tmp_path / "ok")
    assert code == 0, err
    assert "imported" in out
    assert "partial" not in out
    code, out, _ = run(capsys, "--home", tmp_path / "ok", "verify")
    assert code == 0, out
    assert "bodies erased" in out, out


def test_a_cut_short_or_edited_export_is_refused(small: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    into = tmp_path / "new"
    text = small.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(text[: len(text) - 40])
    _refused(capsys, cut, into, "cut short")
    lost = tmp_path / "lost.jsonl"
    lost.write_bytes(b"".join(text.splitlines(keepends=True)[:-1]))
    _refused(capsys, lost, into, "lines are missing")
    _refused(capsys, _edit(small, 2, lambda s: s.replace('"session-0"', '"session-9"', 1)),
             into, "edited")
    # The readable body and the stored one told apart: text edited in the body.
    _refused(capsys, _edit(small, 4, lambda s: s.replace('"pytest:root"', '"pytest:ROOT"', 1)),
             into, "edited")

    def flip_stored_body(line: str) -> str:
        event = json.loads(line)
        body = bytearray(base64.b64decode(event["stored"]["body"]))
        body[-1] ^= 1
        event["stored"]["body"] = base64.b64encode(bytes(body)).decode()
        return json.dumps(event) + "\n"

    _refused(capsys, _edit(small, 4, flip_stored_body), into, "commitment")
    rows = text.splitlines(keepends=True)
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_bytes(b"".join([rows[0], rows[2], rows[1], *rows[3:]]))
    _refused(capsys, swapped, into, "position 1 was due")
    _refused(capsys, _edit(small, 0, lambda s: "{}\n"), into, "not a lessonledger export")
    _refused(capsys, tmp_path / "nope.jsonl", into, "no export file")
    extra = tmp_path / "extra.jsonl"
    extra.write_bytes(text + rows[-1])
    _refused(capsys, extra, into, "position")


def _forged(path: Path, change: Any) -> Path:
    """The export with one envelope changed and every link after it recomputed.

    What a forger who can write the file can do (the chain has no key): only what the
    stored events say can refuse it.
    """
    header, *events = lines(path)
    previous = bytes(32)
    for event in events:
        stored = event["stored"]
        envelope = decode_envelope(base64.b64decode(stored["envelope"]))
        envelope = change(envelope, event["position"])
        raw = encode_envelope(envelope)
        previous = chain_link(previous, raw)
        stored["envelope"] = base64.b64encode(raw).decode()
        stored["link"] = base64.b64encode(previous).decode()
        event["event_id"] = envelope.event_id.hex()
    header[HEADER_KEY]["chain"] = previous.hex()
    forged = path.with_name("forged.jsonl")
    forged.write_text("".join(json.dumps(e) + "\n" for e in [header, *events]))
    return forged


def test_a_forged_chain_repeating_an_event_id_is_refused(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = {e["position"]: bytes.fromhex(e["event_id"]) for e in lines(small)[1:]}
    same = _forged(small, lambda envelope, position: envelope)
    assert run(capsys, "import", same, "--into", tmp_path / "same")[0] == 0, "the helper forges"
    again = _forged(small, lambda envelope, position: msgspec.structs.replace(
        envelope, event_id=ids[1]) if position == 2 else envelope)
    _refused(capsys, again, tmp_path / "new", "repeats an earlier event's id")


def test_a_rewritten_history_is_refused_once_the_source_chain_head_is_pinned(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = small.parent / "home"
    code, out, _ = run(capsys, "--home", home, "verify", "--json")
    pinned = json.loads(out)["chain"]
    assert code == 0
    assert len(pinned) == 64
    assert f"chain head {pinned}" in run(capsys, "--home", home, "verify")[1]
    code, out, err = run(capsys, "import", small, "--into", tmp_path / "ok",
                         "--expect-chain", pinned.upper())
    assert code == 0, err
    assert json.loads(run(capsys, "--home", tmp_path / "ok", "verify", "--json")[1])[
        "chain"] == pinned
    # A forger who rewrites the actor and every link after it makes a file that imports
    # and verifies on its own: only the pinned head tells it apart.
    rewritten = _forged(small, lambda envelope, position: msgspec.structs.replace(
        envelope, actor="someone else") if position == 1 else envelope)
    header, first, *rest = lines(rewritten)
    first["actor"] = "someone else"  # its readable form says what its envelope says
    rewritten.write_text("".join(json.dumps(e) + "\n" for e in [header, first, *rest]))
    code, _, err = run(capsys, "import", rewritten, "--into", tmp_path / "free")
    assert code == 0, err
    code, out, err = run(capsys, "import", rewritten, "--into", tmp_path / "pinned",
                         "--expect-chain", pinned)
    assert (code, out) == (2, ""), err
    assert len(err.strip().splitlines()) == 1, err
    assert "not the expected" in err, err
    assert not (tmp_path / "pinned").exists()
    assert run(capsys, "import", small, "--into", tmp_path / "bad",
               "--expect-chain", "xyz")[0] == 2
    assert not (tmp_path / "bad").exists()


def test_an_erased_body_put_back_is_refused(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    _fill(home, [("outcome", "alice", "agent", 0)])
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    assert run(capsys, "--home", home, "export", "--include-envelopes", "-o", before)[0] == 0
    with open_ledger(home, sync=False) as ledger:
        ledger.erase(what="principal", subject="alice", reason="asked", key="e")
    assert run(capsys, "--home", home, "export", "--include-envelopes", "-o", after)[0] == 0
    rows = after.read_text().splitlines(keepends=True)
    old = before.read_text().splitlines(keepends=True)
    erased = next(i for i, r in enumerate(rows) if json.loads(r).get("body") == "erased")
    back = tmp_path / "back.jsonl"
    back.write_text("".join([*rows[:erased], old[erased], *rows[erased + 1:]]))
    _refused(capsys, back, tmp_path / "new", "never brought back")


def test_a_partial_export_or_one_without_envelopes_is_refused_a_prefix_says_so(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    for argv, words in ((["--principal", "bob", "--include-envelopes"], "partial export"),
                        (["--project", PROJECTS[0], "--include-envelopes"], "partial export"),
                        (["--from", "2", "--include-envelopes"], "partial export"),
                        ([], "--include-envelopes")):
        part = tmp_path / "part.jsonl"
        assert run(capsys, "--home", home, "export", *argv, "-o", part)[0] == 0
        _refused(capsys, part, tmp_path / "new", words)
    prefix = tmp_path / "prefix.jsonl"
    assert run(capsys, "--home", home, "export", "--to", 3, "--include-envelopes",
               "-o", prefix)[0] == 0
    code, out, err = run(capsys, "import", prefix, "--into", tmp_path / "p")
    assert code == 0, err
    assert "partial: positions 1 to 3 of a log whose head was" in out


def test_the_target_must_be_new_or_empty(small: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    _refused(capsys, small, full, "not a new or empty directory")
    assert run(capsys, "import", small, "--into", tmp_path / "one")[0] == 0
    _refused(capsys, small, tmp_path / "one", "not a new or empty directory")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(capsys, "import", small, "--into", empty)[0] == 0


def test_an_export_to_a_pipe_writes_into_it_and_leaves_it_a_pipe(
        small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # As to /dev/null: written as it is, never replaced by a file renamed over it.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, _, err = run(capsys, "--home", tmp_path / "home", "export", "-o", fifo)
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert len(got[0].splitlines()) == len(lines(small))
    assert not fifo.with_name("pipe.partial").exists()


def test_export_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    small: Path) -> None:
    code, _, err = run(capsys, "--home", tmp_path / "home", "export", "--principal", "a",
                       "--project", PROJECTS[0])
    assert code == 2
    assert "not allowed with" in err
    code, _, err = run(capsys, "--home", tmp_path / "nowhere", "export")
    assert code == 2
    assert "no ledger at" in err
    assert not (tmp_path / "nowhere").exists()
