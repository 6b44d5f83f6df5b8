"""Review of issue #10: a command built by hand fails with a typed error, not a KeyError.

A msgspec Struct's constructor checks nothing but runs ``__post_init__``: a hand-built
``ProposeLesson(kind="bogus")`` raised a bare ``KeyError`` there, and one without the
operations its kind needs a bare ``ValueError``. An unknown kind is left to validation
(:func:`checked_command`, which the ledger runs on every command); missing operations are
an :class:`InvalidCommandError` naming the field, which decoding still reports as a
``msgspec.ValidationError`` with its path, as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from lessonledger.commands import open_ledger
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.commands.messages import ProposeLesson, command_from, decode_command

P = "3f9a0c1b2d4e5f60"
FIELDS: dict[str, Any] = {"key": "p", "project": P, "text": "x", "target": "t"}


def test_an_unknown_kind_built_by_hand_is_refused_by_validation(tmp_path: Path) -> None:
    command = ProposeLesson(**FIELDS, kind="bogus")  # type: ignore[arg-type]
    with open_ledger(tmp_path, sync=False) as ledger:
        with pytest.raises(InvalidCommandError) as refused:
            ledger.execute(command)
        assert refused.value.field == "$.kind"
        assert ledger.log.head() == 0


@pytest.mark.parametrize(("kind", "given", "field"), [
    ("prefer", {}, "$.avoid_op"),
    ("prefer", {"avoid_op": "a"}, "$.prefer_op"),
    ("avoid", {"prefer_op": "b"}, "$.avoid_op"),
    ("do", {"avoid_op": "a"}, "$.prefer_op"),
])
def test_missing_operations_are_an_invalid_command_naming_the_field(
        kind: str, given: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidCommandError) as refused:
        ProposeLesson(**FIELDS | given, kind=kind)  # type: ignore[arg-type]
    assert refused.value.field == field
    with pytest.raises(InvalidCommandError) as refused:
        command_from(FIELDS | given | {"kind": kind}, ProposeLesson)
    assert refused.value.field == field
    doc = FIELDS | given | {"kind": kind, "command": "propose_lesson"}
    with pytest.raises(msgspec.ValidationError, match="needs"):
        decode_command(json.dumps(doc))
