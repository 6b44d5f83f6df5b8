"""The skill, deltas and facts commands of the CLI, each with --json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from lessonledger.ops.cli import main

BODY = "# Triage\n\n## Ranking\n\nRank.\n\n## Drafting replies\n\nBe kind.\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def js(capsys: pytest.CaptureFixture[str], home: str, *argv: str) -> Any:
    code, out, err = run(capsys, "--home", home, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    path = tmp_path / "triage" / "SKILL.md"
    path.parent.mkdir()
    path.write_bytes(BODY.encode())
    return path


@pytest.fixture
def home(tmp_path: Path, capsys: pytest.CaptureFixture[str], skill: Path) -> str:
    path = str(tmp_path / "home")
    assert run(capsys, "--home", path, "init")[0] == 0
    base = js(capsys, path, "skill", "register", str(skill), "--tool", "search",
              "--tool", "label", "--version", "1.0")
    assert base["skill"] == "triage"
    assert base["anchors"] == ["triage", "ranking", "drafting-replies"]
    return path


def test_register_resolve_diff_approve_archive(capsys: pytest.CaptureFixture[str],
                                               home: str, skill: Path) -> None:
    staged = js(capsys, home, "deltas", "propose", "triage", "--tier", "3", "--kind",
                "preference", "--anchor", "drafting-replies", "--payload", "Be brief.")
    delta = staged["delta_id"]
    [pending] = js(capsys, home, "deltas", "pending")
    assert (pending["delta_id"], pending["status"]) == (delta, "staged")
    diff = js(capsys, home, "skill", "diff", "triage", str(skill), delta[:8])
    assert diff["without"]["text"] == BODY
    assert "+- preference (drafting-replies): Be brief." in diff["diff"]
    assert js(capsys, home, "deltas", "approve", delta[:8])["approve"] == [delta]
    on = js(capsys, home, "skill", "resolve", "triage", str(skill))
    assert on["text"].startswith(BODY)
    assert on["rendered"] == [delta]
    off = js(capsys, home, "skill", "resolve", "triage", str(skill), "--off")
    assert hashlib.sha256(off["text"].encode()).hexdigest() == hashlib.sha256(
        skill.read_bytes()).hexdigest()
    js(capsys, home, "deltas", "archive", delta, "--reason", "compare")
    assert js(capsys, home, "skill", "resolve", "triage", str(skill))["text"] == BODY
    [row] = js(capsys, home, "deltas", "list", "--status", "archived")
    assert row["delta_id"] == delta
    code, out, _ = run(capsys, "--home", home, "skill", "resolve", "triage", str(skill))
    assert code == 0
    assert out.startswith(BODY)


def test_refusals_exit_2_and_name_the_rule(capsys: pytest.CaptureFixture[str],
                                           home: str) -> None:
    code, _, err = run(capsys, "--home", home, "deltas", "propose", "triage", "--tier", "1",
                       "--kind", "tool_hint", "--payload", "send_now")
    assert code == 2
    assert "rule no-new-tool" in err
    code, _, err = run(capsys, "--home", home, "deltas", "propose", "triage", "--tier", "3",
                       "--kind", "preference", "--payload", "followup_hours = 48")
    assert code == 2
    assert "facts learn" in err
    assert js(capsys, home, "deltas", "list") == []


def test_a_changed_skill_orphans_and_approve_orphans_reapproves(
        capsys: pytest.CaptureFixture[str], home: str, skill: Path) -> None:
    hint = js(capsys, home, "deltas", "propose", "triage", "--tier", "1", "--kind",
              "tool_hint", "--payload", "label", "--provenance", "extractor")["delta_id"]
    js(capsys, home, "deltas", "approve", hint)
    skill.write_bytes(BODY.replace("Rank.", "Rank by date.").encode())
    changed = js(capsys, home, "skill", "register", str(skill), "--tool", "search",
                 "--tool", "label")
    assert changed["orphaned"] == [hint]
    first = js(capsys, home, "skill", "resolve", "triage", str(skill), "--session", "s1")
    assert (first["tools"], first["orphans"]) == ([], [hint])
    again = js(capsys, home, "skill", "resolve", "triage", str(skill), "--session", "s2")
    assert again["orphans"] == []
    assert js(capsys, home, "deltas", "approve", "--orphans")["approve"] == [hint]
    assert js(capsys, home, "skill", "resolve", "triage", str(skill))["tools"] == ["label"]
    code, _, err = run(capsys, "--home", home, "skill", "resolve", "triage", "/dev/null")
    assert code == 2
    assert "register this version" in err


def test_facts_list_inert_learn_declare(capsys: pytest.CaptureFixture[str],
                                        home: str) -> None:
    js(capsys, home, "facts", "learn", "priority_senders", "alice@example.com", "urgent")
    [inert] = js(capsys, home, "facts", "inert")
    assert (inert["namespace"], inert["consumers"]) == ("priority_senders", [])
    js(capsys, home, "facts", "declare", "triage_inbox", "priority_senders")
    assert js(capsys, home, "facts", "inert") == []
    [row] = js(capsys, home, "facts", "list")
    assert row["consumers"] == ["triage_inbox"]
    assert row["value"] == "urgent"


def test_register_reads_name_version_and_allowed_tools_from_front_matter(
        capsys: pytest.CaptureFixture[str], home: str, tmp_path: Path) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text("---\nname: inbox-zero\nversion: '2.1'\nallowed-tools: read_mail, "
                    "archive\nmetadata:\n  x: y\n---\n# Inbox zero\n")
    base = js(capsys, home, "skill", "register", str(path))
    assert (base["skill"], base["version"], base["tools"]) == (
        "inbox-zero", "2.1", ["read_mail", "archive"])
    override = js(capsys, home, "skill", "register", str(path), "--name", "other",
                  "--tool", "grep")
    assert (override["skill"], override["tools"]) == ("other", ["grep"])


def test_register_reads_permissions_from_front_matter(capsys: pytest.CaptureFixture[str],
                                                      home: str, tmp_path: Path) -> None:
    path = tmp_path / "deploy" / "SKILL.md"
    path.parent.mkdir()
    path.write_text("---\nname: deploy\nallowed-tools: Bash(git:*), Write\nmetadata:\n"
                    "  gaia:\n    permissions: [network:*, shell]\n---\n# Deploy\n\n"
                    "## Steps\nrun it\n")
    base = js(capsys, home, "skill", "register", str(path))
    assert {"network:*", "shell", "filesystem"} <= set(base["permissions"])
    code, _, err = run(capsys, "--home", home, "deltas", "propose", "deploy", "--tier", "3",
                       "--kind", "caveat", "--anchor", "steps", "--payload", "Be careful.")
    assert code != 0
    assert "no-local-capability" in err


@pytest.mark.parametrize("front", [
    "permissions: shell\n", "permissions:\n  - filesystem:read\n",
    "metadata:\n  gaia:\n    permissions:\n      - exec\n", "allowed-tools: Bash\n",
    "allowed-tools: [Read, Edit]\n"])
def test_front_matter_local_capabilities_are_permissions(front: str) -> None:
    from lessonledger.ops.skill_commands import front_matter_permissions
    assert front_matter_permissions(f"---\nname: x\n{front}---\nbody\n")


def test_front_matter_without_permissions_has_none() -> None:
    from lessonledger.ops.skill_commands import front_matter_permissions
    text = "---\nname: x\nallowed-tools: search, label\nmetadata:\n  gaia:\n" \
        "    permissions: []\n---\nbody\n"
    assert front_matter_permissions(text) == []


def test_moves_and_facts_take_a_key_and_a_retry_writes_nothing(
        capsys: pytest.CaptureFixture[str], home: str) -> None:
    delta = js(capsys, home, "deltas", "propose", "triage", "--tier", "3", "--kind",
               "preference", "--anchor", "drafting-replies", "--payload", "Be brief.")["delta_id"]
    first = js(capsys, home, "deltas", "approve", delta, "--key", "ap-1")
    assert js(capsys, home, "deltas", "approve", delta, "--key", "ap-1") == first
    for verb in ("archive", "reject"):
        _, _, err = run(capsys, "--home", home, "deltas", verb, delta, "--key", f"{verb}-1")
        assert "--key" not in err
    learned = js(capsys, home, "facts", "learn", "triage", "vip", "alice", "--key", "f-1")
    assert js(capsys, home, "facts", "learn", "triage", "vip", "alice", "--key", "f-1") == learned
    [row] = js(capsys, home, "facts", "list")
    assert row["learned"] == 1
    declared = js(capsys, home, "facts", "declare", "ranker", "triage", "--key", "d-1")
    assert js(capsys, home, "facts", "declare", "ranker", "triage", "--key", "d-1") == declared


def test_moves_say_what_they_did_and_budget_is_not_negative(
        capsys: pytest.CaptureFixture[str], home: str, skill: Path) -> None:
    delta = js(capsys, home, "deltas", "propose", "triage", "--tier", "3", "--kind",
               "preference", "--anchor", "drafting-replies", "--payload", "Be brief.")["delta_id"]
    assert "rejected 1 delta" in run(capsys, "--home", home, "deltas", "reject", delta)[1]
    with pytest.raises(SystemExit) as exited:
        run(capsys, "--home", home, "skill", "resolve", "triage", str(skill), "--budget", "-5")
    assert exited.value.code == 2
    assert "budget" in capsys.readouterr().err


def test_a_permission_change_on_register_reports_the_orphans(
        capsys: pytest.CaptureFixture[str], home: str, skill: Path) -> None:
    hint = js(capsys, home, "deltas", "propose", "triage", "--tier", "1", "--kind",
              "tool_hint", "--payload", "label", "--provenance", "extractor")["delta_id"]
    js(capsys, home, "deltas", "approve", hint)
    again = js(capsys, home, "skill", "register", str(skill), "--tool", "search", "--tool",
               "label", "--permission", "shell")
    assert again["orphaned"] == [hint]
    code, out, _ = run(capsys, "--home", home, "skill", "register", str(skill),
                       "--tool", "search", "--tool", "label", "--permission", "shell")
    assert code == 0
    assert "orphaned" not in out  # nothing changed this time


def test_resolve_can_trial_a_staged_auto_approve_delta(capsys: pytest.CaptureFixture[str],
                                                       home: str, skill: Path) -> None:
    hint = js(capsys, home, "deltas", "propose", "triage", "--tier", "1", "--kind",
              "tool_hint", "--payload", "label", "--provenance", "extractor",
              "--auto-approve")["delta_id"]
    tried = js(capsys, home, "skill", "resolve", "triage", str(skill), "--session", "s1",
               "--trial", hint[:8])
    assert (tried["tools"], tried["rendered"]) == (["label"], [hint])
