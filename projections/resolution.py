"""Resolution: the effective skill, base ⊕ active deltas, as one deterministic text.

- **Off** (``learning=False``): the base text exactly, no tool hints. Its SHA-256 is
  the registered body digest.
- **On**: the base text, then one ``## Learned adjustments`` block holding every active
  tier-3 delta in scope (the scope's own and global ones), one item each, in (tier,
  kind, created_at, id) order. The same delta set gives the same bytes in any process:
  nothing in the text depends on the clock, the process or a dict's order. With no
  delta to render the text is the base exactly.
- **Budget**: the block is at most ``budget`` tokens (a token is taken as 4 bytes of
  UTF-8, rounded up: a CJK character or an emoji costs what it weighs). Deltas are
  admitted whole, most valuable first (success rate over their attributed outcomes,
  smoothed as (s + 1) / (n + 2); then more samples; then older); from the first that
  does not fit on, the rest are *retrieval-only*: listed, not rendered. No item is ever
  cut, and a proposal whose item could never fit the default budget is refused.
- **Tool hints** (tier 1): the tools named by active hints, only those the agent has
  (``available``, by default the skill's declared tools), at most
  :data:`MAX_TOOL_HINTS`, most valuable first, then listed in rendering order. Hints over
  the cap are retrieval-only too.
- A **trial** (``trial=``) renders named staged deltas as if active: only trusted ones
  proposed with ``auto_approve`` (the only ones a track record can activate); rendered,
  they are in play for the session's outcomes.
- Otherwise staged, rejected, archived, orphaned and superseded deltas render nothing, and
  nothing renders on a skill whose registration is not connector-only
  (:mod:`.capabilities`), whatever the deltas' status says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from hashlib import sha256
from uuid import UUID

import msgspec
from lessonledger.projections.capabilities import connector_only
from lessonledger.projections.deltas import BaseRow, DeltaRow, DeltaView

__all__ = [
    "DEFAULT_BUDGET",
    "HEADER",
    "MAX_TOOL_HINTS",
    "EffectiveSkill",
    "fits",
    "item_text",
    "render_item",
    "resolve",
    "tokens",
]

#: At most this many tool hints (the tool loader's cap on a skill's tools).
MAX_TOOL_HINTS = 14
#: Tokens the learned block may hold by default (about 1,600 characters).
DEFAULT_BUDGET = 400
HEADER = "## Learned adjustments\n\n"


class EffectiveSkill(msgspec.Struct, frozen=True, kw_only=True):
    """A resolved skill: what goes in front of the agent, and what was left out.

    Attributes:
        text: the effective text (the base exactly when off or with nothing to render).
        tools: tool hints, in rendering order.
        rendered: the deltas in ``text`` and ``tools``, in rendering order.
        retrieval_only: active deltas over the budget or the hint cap.
        orphans: orphaned deltas not reported before (a notice, shown once).
        text_digest: SHA-256 (hex) of ``text``.
        learned_tokens: the block's size in tokens (0 when nothing is rendered).
    """

    skill: str
    root: str
    version: str
    scope: str
    learning: bool
    text: str
    tools: list[str]
    rendered: list[UUID]
    retrieval_only: list[UUID]
    orphans: list[UUID]
    text_digest: str
    budget: int
    learned_tokens: int


def tokens(text: str) -> int:
    """The token estimate the budget counts: 4 bytes of UTF-8 a token, rounded up."""
    return (len(text.encode()) + 3) // 4


#: What opens Markdown structure at a line's start: a heading, a fence, a block quote, a
#: list item, a setext underline or thematic break, an HTML block, a table row.
_OPENS = re.compile(r"[#`~>*+=|<_-]|\d{1,9}(?=[.)])")


def _inert(line: str) -> str:
    """A continuation line, stripped, with what could open structure escaped."""
    line = line.strip()
    found = _OPENS.match(line)
    if found is None:
        return line
    if found.group()[0].isdigit():  # "1." -> "1\."
        return found.group() + "\\" + line[found.end():]
    return "\\" + line


def item_text(row: DeltaRow) -> str:
    """One delta's item in the learned block.

    The payload's first line follows ``- kind (anchor): ``; each further line is
    stripped and indented two spaces, and a line that would open Markdown structure (a
    heading, a code fence, a quote, a list item, a setext underline, an HTML block, a
    table row) has that character backslash-escaped, so no payload can forge a heading,
    open a fence or start an item of its own.
    """
    return render_item(row.kind, row.anchor, row.payload)


def render_item(kind: str, anchor: str, payload: str) -> str:
    """The item :func:`item_text` renders, from its parts (a proposal is checked on it)."""
    lines = payload.strip().splitlines() or [""]
    rest = "".join(f"\n  {_inert(line)}".rstrip(" ") for line in lines[1:])
    return f"- {kind} ({anchor}): {lines[0]}{rest}\n"


def fits(kind: str, anchor: str, payload: str, budget: int = DEFAULT_BUDGET) -> bool:
    """Whether the item could ever render within ``budget`` (with the block's header)."""
    return tokens(HEADER) + tokens(render_item(kind, anchor, payload)) <= budget


def _value(row: DeltaRow) -> tuple[float, int, int, str]:
    """Sort key, most valuable first."""
    rate = (row.total_successes + 1) / (row.total_attempts + 2)
    return (-rate, -row.total_attempts, row.created_at, str(row.delta_id))


def _in_scope(rows: Iterable[DeltaRow], scope: str) -> list[DeltaRow]:
    return [r for r in rows if r.status == "active" and r.scope in (scope, "global")]


def _trial(view: DeltaView, base: BaseRow, scope: str, ids: Iterable[UUID]) -> list[DeltaRow]:
    """The staged deltas a trial may render: this skill's, in scope, trusted, auto."""
    rows = (view.deltas.get(i) for i in dict.fromkeys(ids))
    return [r for r in rows if r is not None and (r.skill, r.root) == (base.skill, base.root)
            and r.status == "staged" and r.auto_approve and r.provenance != "untrusted"
            and r.scope in (scope, "global")]


def _admit_prose(rows: list[DeltaRow], budget: int) -> tuple[list[DeltaRow], list[DeltaRow]]:
    """Split prose deltas into (rendered, retrieval-only) under the budget."""
    used = tokens(HEADER)
    kept: list[DeltaRow] = []
    ranked = sorted(rows, key=_value)
    for index, row in enumerate(ranked):
        cost = tokens(item_text(row))
        if used + cost > budget:
            return kept, ranked[index:]
        kept.append(row)
        used += cost
    return kept, []


def _admit_hints(rows: list[DeltaRow], available: set[str]) -> tuple[
        list[DeltaRow], list[DeltaRow]]:
    kept: list[DeltaRow] = []
    over: list[DeltaRow] = []
    tools: set[str] = set()
    for row in sorted((r for r in rows if r.payload in available), key=_value):
        if row.payload in tools:
            kept.append(row)  # the same tool again: it costs nothing more
        elif len(tools) < MAX_TOOL_HINTS:
            tools.add(row.payload)
            kept.append(row)
        else:
            over.append(row)
    return kept, over


def resolve(view: DeltaView, base: BaseRow, base_text: str, scope: str, *,
            learning: bool = True, budget: int = DEFAULT_BUDGET,
            available: Iterable[str] | None = None,
            replay: list[UUID] | None = None, trial: Iterable[UUID] = ()) -> EffectiveSkill:
    """The effective skill; ``base_text`` must be the registered base (its digest checked).

    ``replay`` renders exactly those deltas (a session's first resolution, as recorded),
    whatever their status now, without the budget, and reports no orphan; deltas erased
    since are gone from the view and left out. ``trial`` names staged deltas to render as
    if active, only those of this skill and scope proposed with ``auto_approve`` by a
    trusted provenance (so they can earn their track record).
    """
    learns = learning and connector_only(base.permissions)
    if replay is not None:
        rows = [view.deltas[i] for i in replay if i in view.deltas] if learns else []
    else:
        rows = _in_scope(view.on(base.skill, base.root), scope) if learns else []
        rows += _trial(view, base, scope, trial) if learns else []
    prose, over = _admit_prose([r for r in rows if r.tier >= 2],
                               budget if replay is None else 2**62)
    tools = set(base.tools if available is None else available) & set(base.tools)
    hints, too_many = _admit_hints([r for r in rows if r.tier == 1], tools)
    prose.sort(key=lambda r: r.order)
    hints.sort(key=lambda r: r.order)
    text = base_text
    block = ""
    if prose:
        block = HEADER + "".join(item_text(r) for r in prose)
        text = base_text + ("\n" if base_text.endswith("\n") else "\n\n") + block
    return EffectiveSkill(
        skill=base.skill, root=base.root, version=base.version, scope=scope,
        learning=learning, text=text, tools=list(dict.fromkeys(r.payload for r in hints)),
        rendered=[r.delta_id for r in sorted([*hints, *prose], key=lambda r: r.order)],
        retrieval_only=[r.delta_id for r in sorted([*over, *too_many], key=lambda r: r.order)],
        # Only this scope's and global orphans: another project's are its own notice.
        orphans=[i for i in view.unshown_orphans(base.skill, base.root)
                 if i in view.deltas and view.deltas[i].scope in (scope, "global")]
        if learning and replay is None else [],
        text_digest=sha256(text.encode()).hexdigest(), budget=budget,
        learned_tokens=tokens(block) if block else 0)
