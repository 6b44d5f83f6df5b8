"""Why a skill, delta or fact command was refused. Nothing was written; each says what to do.

A delta refused by a rule raises a :class:`DeltaRefusedError` whose ``rule`` names it:

- ``fact-is-tier-0``: a fact-shaped lesson (tier 0, kind ``fact``, or one
  ``name = value`` line); record it with ``learn_fact`` instead;
- ``delta-grammar``: a kind outside the grammar, or in the wrong tier;
- ``no-new-tool``: a tool hint naming a tool the skill does not have;
- ``no-permission-change``: a change to permissions, allowed tools or the security tier;
- ``no-local-capability``: any delta on a skill with local-capability permissions;
- ``over-budget``: a prose item larger than the learned block's default budget (it
  could never render);
- ``untrusted-never-auto``: untrusted provenance set to auto-approve;
- ``supersedes-own-skill``: a delta naming a delta of another skill (or root) in
  ``supersedes`` (:class:`CrossSkillSupersedeError`);
- ``outcome-needs-evidence``: provenance ``outcome`` citing no outcome, or one the ledger
  does not have;
- ``no-instruction-injection``: instruction-injection text in the payload;
- ``supersedes-own-scope``: a delta naming a delta of another scope in ``supersedes``
  (approving it would change what that scope's resolution renders);
- ``rejected-stays-rejected``: a proposal saying what a rejected delta of the skill
  said, unless a person's own (provenance ``user_instruction``);
- ``resolution-renders-what-resolves`` (:data:`UNRESOLVABLE`): a resolution's record
  naming a delta a resolution there could not render (staged and not on trial, of
  another skill or scope) or an orphan of another skill or scope.
"""

from __future__ import annotations

from uuid import UUID

from lessonledger.commands.errors import CommandError

__all__ = [
    "UNRESOLVABLE",
    "AnchorGoneError",
    "BaseMismatchError",
    "CrossSkillSupersedeError",
    "DeltaRefusedError",
    "DeltaStateError",
    "FactShapedError",
    "InjectionError",
    "UnknownAnchorError",
    "UnknownDeltaError",
    "UnknownSkillError",
]


#: The rule a resolution's record breaks when it names what no resolution there renders;
#: also what a record made stale by a decision in between is refused for.
UNRESOLVABLE = "resolution-renders-what-resolves"


class DeltaRefusedError(CommandError, ValueError):
    """A delta breaks a write-path rule; ``rule`` names it, ``field`` where."""

    def __init__(self, rule: str, problem: str, remedy: str, field: str = "$") -> None:
        super().__init__(f"{field}: {problem} (rule {rule}); {remedy}; nothing was written")
        self.rule = rule
        self.field = field


class FactShapedError(DeltaRefusedError):
    """A fact is tier 0: a row a tool reads, not a delta. Carries the routed fact."""

    def __init__(self, namespace: str, key: str, value: str) -> None:
        super().__init__(
            "fact-is-tier-0", "a fact-shaped lesson is not a delta",
            f"record it as a tier-0 fact: learn_fact(namespace={namespace!r}, "
            f"fact_key={key or 'KEY'!r}, value=…) or `lessonledger facts learn`",
            "$.payload")
        self.namespace = namespace
        self.key = key
        self.value = value


class InjectionError(DeltaRefusedError):
    """The text carries an instruction-injection shape (see ``commands.injection``)."""

    def __init__(self, pattern: str, field: str) -> None:
        super().__init__("no-instruction-injection", f"looks like instruction injection "
                         f"({pattern})", "state the preference itself, without "
                         "instructions to the model, role tags or tool-call markup", field)
        self.pattern = pattern


class UnknownSkillError(CommandError, KeyError):
    """No base is registered under this name and root."""

    def __init__(self, skill: str, root: str) -> None:
        super().__init__(f"no skill {skill!r} in root {root!r}; register it first "
                         "(`lessonledger skill register PATH --name NAME`)")
        self.skill = skill
        self.root = root

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownAnchorError(CommandError, KeyError):
    """The delta names a section the base does not have."""

    def __init__(self, anchor: str, known: list[str]) -> None:
        super().__init__(f"the skill has no section {anchor!r} for this delta (prose "
                         f"anchors to a section); anchor to one of {', '.join(known)}")
        self.anchor = anchor

    def __str__(self) -> str:
        return str(self.args[0])


class AnchorGoneError(UnknownAnchorError):
    """An orphan's section is not in the skill as now registered: it cannot be re-approved."""

    def __init__(self, delta_id: UUID, anchor: str, known: list[str]) -> None:
        CommandError.__init__(
            self, f"delta {delta_id} is anchored to section {anchor!r}, which the skill no "
            f"longer has (its sections: {', '.join(known) or 'none'}); it cannot be "
            "re-approved: propose a replacement anchored to a current section with "
            f"supersedes=[{delta_id}], or reject it; nothing was written")
        self.anchor = anchor
        self.delta_id = delta_id


class CrossSkillSupersedeError(DeltaRefusedError):
    """A delta may supersede only deltas of its own skill (name and root)."""

    def __init__(self, delta_id: UUID, theirs: str, mine: str) -> None:
        super().__init__("supersedes-own-skill", f"delta {delta_id} is on skill {theirs}, "
                         f"not {mine}", "supersede only deltas of the same skill and root",
                         "$.supersedes")
        self.delta_id = delta_id


class UnknownDeltaError(CommandError, KeyError):
    """No delta has this id."""

    def __init__(self, delta_id: UUID) -> None:
        super().__init__(f"no delta {delta_id}; list them with `lessonledger deltas list`")
        self.delta_id = delta_id

    def __str__(self) -> str:
        return str(self.args[0])


class DeltaStateError(CommandError):
    """The delta is not in a state this move starts from."""

    def __init__(self, delta_id: UUID, status: str, move: str, allowed: list[str]) -> None:
        super().__init__(f"delta {delta_id} is {status}: only a {' or '.join(allowed)} "
                         f"delta can be {move}; nothing was written")
        self.delta_id = delta_id
        self.status = status


class BaseMismatchError(CommandError, ValueError):
    """The base text given to resolution is not the registered version."""

    def __init__(self, skill: str, expected: str, got: str) -> None:
        super().__init__(f"the text given for skill {skill!r} has digest {got[:12]}…, the "
                         f"registered version {expected[:12]}…; register this version "
                         "first, or pass the registered file")
        self.expected = expected
        self.got = got
