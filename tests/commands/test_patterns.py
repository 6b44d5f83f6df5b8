"""Review of issue #10 (F5): a digest pattern must not accept a trailing newline.

msgspec checks ``Meta(pattern=...)`` with ``re.search``, where ``$`` also matches before a
final newline: ``"3f9a0c1b2d4e5f60\\n"`` was a project of its own, and an agent's lessons
silently split into it. The patterns end in ``\\Z`` instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.commands.messages import checked_project, decode_command
from lessonledger.ledger.events import Scope, SectionAnchor, SkillBaseRegistered

P = "3f9a0c1b2d4e5f60"


@pytest.mark.parametrize("value", [P + "\n", "global\n", "\n" + P, P + "\r\n", P + " "])
def test_a_scope_with_a_line_break_is_refused(value: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(value, Scope)
    with pytest.raises(InvalidCommandError):
        checked_project(value)
    with pytest.raises(msgspec.ValidationError):
        decode_command(json.dumps({"command": "observe_outcome", "key": "k", "project": value,
                                   "passed": True}))


def test_queries_and_commands_refuse_the_newline_project(tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as ledger:
        with pytest.raises(InvalidCommandError):
            ledger.observe_outcome(key="k", project=P + "\n", passed=True)
        with pytest.raises(InvalidCommandError):
            ledger.recall(P + "\n", "run the tests")
        assert ledger.log.head() == 0


def test_a_digest_with_a_trailing_newline_is_refused() -> None:
    digest = "a" * 64
    assert msgspec.convert({"slug": "s", "digest": digest}, SectionAnchor).digest == digest
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"slug": "s", "digest": digest + "\n"}, SectionAnchor)
    fields = {"type": "skill.registered", "skill": "s", "root": "r", "version": "1"}
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(fields | {"body_digest": digest + "\n"}, SkillBaseRegistered)
    assert msgspec.convert(fields | {"body_digest": digest}, SkillBaseRegistered)


def test_no_pattern_in_the_code_base_ends_in_a_dollar() -> None:
    root = Path(__file__).resolve().parents[2]
    for path in root.glob("*/*.py"):
        if path.parts[-2] in {"tests", ".venv"}:
            continue
        text = path.read_text()
        assert 'pattern=r"^' not in text or '$")' not in text, path
