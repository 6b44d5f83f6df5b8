"""Decisions the ledger makes by itself when events arrive (DESIGN §2, §4).

Each policy is a pure function of the lesson view as it stood right after the triggering
event was folded in, and returns the events to append. The processor gives those events
ids derived from the trigger's id, so running a policy twice (after a crash, or in two
processes at once) writes nothing twice: every process that folds the same log prefix
decides the same events with the same ids.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from lessonledger.ledger.envelope import Envelope
from lessonledger.ledger.events import (
    LESSON_CONFIRMED,
    LESSON_CONTRADICTED,
    TRIGGERS_POLICIES,
    AnyEvent,
    EnvironmentChanged,
    LessonConfirmed,
    LessonContradicted,
    LessonDemoted,
    LessonPromoted,
    LessonProposed,
    LessonSuperseded,
    Operation,
    OutcomeObserved,
)
from lessonledger.ledger.ids import derived_id
from lessonledger.projections.lessons import (
    LessonRow,
    LessonView,
    failure_key,
    strongest_first,
)
from lessonledger.projections.recall import holding_here
from lessonledger.projections.rules import clamp, looks_transient

__all__ = ["TRIGGERS", "copy_id", "dead_ends", "failed_then_succeeded", "react", "teachable",
           "trigger_id", "verdict"]

#: Event types a policy reacts to.
TRIGGERS = TRIGGERS_POLICIES

#: Whether a failed operation's error is a blip (says nothing about the operation).
Blip = Callable[[Operation], bool]


def _looks_transient(op: Operation) -> bool:
    return looks_transient(op.error)


def _blips(view: LessonView, event: OutcomeObserved) -> Blip:
    """An outcome's blips: transient-looking errors, but for those that recur (rule 12).

    An error that looks transient and that the operation gave on that target in this
    project in ``Rules.recurring`` sessions running, without working in between, is
    lasting there: the view counts the run (``Failure.streak``), this outcome included.
    """
    recurring, failures = view.rules.recurring, view.failures

    def blip(op: Operation) -> bool:
        if not looks_transient(op.error):
            return False
        failure = failures.get(failure_key(event.project, op.op, op.target))
        return failure is None or failure.error != op.error or failure.streak < recurring
    return blip


def react(view: LessonView, event: AnyEvent, envelope: Envelope) -> list[AnyEvent]:
    """Return what the ledger decides in reaction to ``event``."""
    match event:
        case OutcomeObserved():
            blip = _blips(view, event)
            decided = _observed_environment(view, event)
            decided += _attribute(view, event, envelope, blip)
            decided += _learn(view, event, envelope, decided, blip)
            return decided
        case LessonProposed():
            return _promote(view, view.lessons[event.lesson_id])
        case LessonConfirmed():
            # A claim's first confirmation makes it a lesson (a claim has no evidence, so
            # this confirmation is its only one): a second project may now hold an
            # equivalent. Any other confirmation leaves the set of lessons as it was.
            row = view.lessons.get(event.lesson_id)
            if row is None or len(row.evidence) != 1:
                return []
            return _promote(view, row)
        case _:
            return []


def _observed_environment(view: LessonView, event: OutcomeObserved) -> list[AnyEvent]:
    """An outcome's fingerprint that differs from what the project's lessons are bound to.

    Issue 12, rule 6: until now only a declared change (``declare_environment_change``)
    moved bound lessons, so an outcome recorded under ``tool=2.0`` left a lesson learned
    under ``tool=1.0`` trusted. Seed 003 drops a lesson to trial automatically when a
    fingerprint component changes: the ledger declares the change itself, as an event
    (one per changed component, naming the value the first such lesson was bound to),
    and the fold does the rest exactly as for a declared one. Only the project's own
    lessons: a global lesson is bound to what several projects had, and one project's
    upgrade says nothing about the others. A component the outcome does not report is
    no change.
    """
    changed: dict[str, str] = {}
    # Nearly always every lesson is bound to what the outcome reports: the view counts
    # the values each component is bound to, so only a change walks the lessons.
    if not any(view.bound_otherwise(event.project, component, value)
               for component, value in event.fingerprint.items()):
        return []
    for row in view.active_for(event.project, history=False):  # fingerprints alone
        if row.scope != event.project:
            continue
        for component, value in event.fingerprint.items():
            bound = row.fingerprint.get(component)
            if bound is not None and bound != value:
                changed.setdefault(component, bound)
    return [EnvironmentChanged(scope=event.project, component=component, old=old,
                               new=event.fingerprint[component])
            for component, old in sorted(changed.items())]


def verdict(row: LessonRow, operations: list[Operation],
            blip: Blip = _looks_transient) -> bool | None:
    """Judge a lesson by operations: True confirms, False contradicts, None: not exercised.

    ``prefer B over A`` predicts B succeeds and A fails; ``avoid A`` that A fails; ``do
    B`` that B succeeds. A failure that looks transient says nothing about such a
    prediction: a timeout neither proves A broken nor B wrong. For a lesson learned from
    a transient-looking failure only the avoided operation counts: failing again (however)
    supports it, succeeding refutes it (and :func:`_attribute` supersedes it as
    ``refuted``); the detour succeeding proves nothing. Nor does an error that different
    operations on the target gave alike (issue 12): a broken test fails every way of
    running it, and says nothing about which way is right.
    """
    held: list[bool] = []
    tentative = row.longevity == "tentative"
    alike = _alike(operations)
    for op in operations:
        if op.target != row.target or (not op.ok and not tentative and blip(op)):
            continue
        if not op.ok and (op.target, op.error) in alike:
            continue  # every form failing alike: the target failed, not the operation
        if op.op == row.avoid_op and row.kind in ("prefer", "avoid"):
            held.append(not op.ok)
        elif op.op == row.prefer_op and row.kind in ("prefer", "do") and not tentative:
            held.append(op.ok)
    if not held:
        return None
    return all(held)


def _preferred_failed(row: LessonRow, operations: list[Operation], blip: Blip) -> bool:
    """True when what ``row`` prefers (or says to do) failed for a lasting reason (rule 10).

    Such a contradiction puts the lesson in doubt in that project (the fold keeps where:
    ``LessonRow.doubted``), and ``check`` and recall stop counting it there until an
    outcome there confirms it again. Measured on an independent trap world, a flip met in
    a session where the new form only blipped left nothing to replace the stale lesson:
    one contradiction took a trusted 0.8 to 0.55, still trusted, still vouching for the
    form that now failed and against the one that now worked, so the agent walked back
    into the failure (13 of 14 stale targets there). Only a lasting, target-specific
    failure of the preferred operation itself counts: the avoided operation working is
    an ordinary contradiction, and a blip or an error every form gave alike says nothing.
    """
    if row.kind not in ("prefer", "do") or row.longevity == "tentative":
        return False
    alike = _alike(operations)
    mine = [op for op in operations if op.op == row.prefer_op and op.target == row.target]
    return not any(op.ok for op in mine) and any(
        not blip(op) and (op.target, op.error) not in alike for op in mine)


def _alike(operations: list[Operation]) -> set[tuple[str, str]]:
    """(target, error) pairs that two or more different operations failed with."""
    seen: dict[tuple[str, str], str] = {}
    alike: set[tuple[str, str]] = set()
    for op in operations:
        if op.ok or not op.error:
            continue
        first = seen.setdefault((op.target, op.error), op.op)
        if first != op.op:
            alike.add((op.target, op.error))
    return alike


def _in_play(view: LessonView, event: OutcomeObserved, session: str) -> list[LessonRow]:
    """The lessons an outcome judges, in the order attribution takes them.

    First those the agent was shown in its session (recalled, or named in the outcome's
    ``in_play``), in the order first shown, each standing for the lesson that replaced
    it since (:func:`_shown_at`); then the project's tentative lessons not shown,
    strongest first: a tentative lesson is tested by any outcome that exercises it, which
    is how an unlucky blip is told from a real trap. Only the project's and global
    lessons on a target the outcome operated on, active or claims: no other is judged by
    it (:func:`verdict` sees no operation on it, :func:`_attribute` takes no other
    scope). So an outcome reads the few lessons on its targets through the view's
    index: walking every lesson the session was shown (some 200 an outcome on a big
    home) was a quarter of its build time.
    """
    named: dict[UUID, int] = {}
    for n, lesson_id in enumerate(event.in_play):
        named.setdefault(lesson_id, n)
    shown: list[tuple[tuple[int, int], UUID]] = []
    tentative: list[LessonRow] = []
    targets = {op.target for op in event.operations}
    for lesson_id in view.attributable((event.project, "global"), targets):
        place = _shown_at(view, lesson_id, named, session)
        if place is not None:
            shown.append((place, lesson_id))
            continue
        row = view.brief(lesson_id)
        if row.active and row.longevity == "tentative":
            tentative.append(row)
    lessons = view.lessons  # with their history: attribution may read it
    return [lessons[i] for _, i in sorted(shown)] + [
        lessons[r.lesson_id] for r in sorted(tentative, key=strongest_first)]


#: How many replacements back a lesson still stands for what the agent was shown (a chain
#: never cycles; the bound only guards bad data).
_CHAIN = 64


def _shown_at(view: LessonView, lesson_id: UUID, named: dict[UUID, int],
              session: str) -> tuple[int, int] | None:
    """Where the agent was first shown a lesson, or one it has replaced since; None: never.

    An agent shown a lesson that another process then merged into an equivalent one (or
    a person then edited) acted on what the survivor says: its outcome is evidence for
    the survivor, whichever of the two the agent happened to see. So a lesson counts as
    shown where any lesson it replaced (and any they replaced, up to :data:`_CHAIN`
    back) was: ``(0, i)`` for the outcome's ``in_play[i]``, ``(1, i)`` for the session's
    ``i``-th recalled lesson.
    """
    best: tuple[int, int] | None = None
    level, seen = [lesson_id], {lesson_id}
    for _ in range(_CHAIN + 1):
        below: list[UUID] = []
        for shown in level:
            if shown in named:
                place: tuple[int, int] | None = (0, named[shown])
            else:
                recalled = view.recalled_place(session, shown)
                place = None if recalled is None else (1, recalled)
            if place is not None and (best is None or place < best):
                best = place
            for older in view.replacing(shown):
                row = view.brief(older)
                if older not in seen and not row.active and row.reason == "replaced" \
                        and row.superseded_by == shown:
                    seen.add(older)
                    below.append(older)
        if not below:
            break
        level = below
    return best


def _attribute(view: LessonView, event: OutcomeObserved, envelope: Envelope,
               blip: Blip) -> list[AnyEvent]:
    decided: list[AnyEvent] = []
    rules = view.rules
    # Rule 11: a global lesson bound to another environment says nothing here, so an
    # outcome here says nothing of it either, even one the agent named as in play.
    for row in holding_here(_in_play(view, event, envelope.session),
                            view.observed(event.project)):
        held = verdict(row, event.operations, blip)
        if held is None or (row.scope not in (event.project, "global")):
            continue
        if held:
            decided.append(LessonConfirmed(
                lesson_id=row.lesson_id, outcome_id=event.outcome_id, project=event.project))
            continue
        decided.append(LessonContradicted(
            lesson_id=row.lesson_id, outcome_id=event.outcome_id, project=event.project,
            failed=_preferred_failed(row, event.operations, blip)))
        if row.longevity == "tentative":
            # What it warned against just worked: the failure it came from was a blip. Left
            # to age out, it would be followed for weeks (measured: it was the largest
            # share of blip-made lessons still active at the end of a trap-world run).
            decided.append(LessonSuperseded(lesson_id=row.lesson_id, reason="refuted"))
            continue
        demoted = row.scope == "global" and event.project not in row.projects \
            and bool(row.projects)
        if demoted:
            decided.append(LessonDemoted(lesson_id=row.lesson_id, to_scope=row.projects[-1],
                                         outcome_id=event.outcome_id))
            decided += _split(view, row, event, envelope)
        if clamp(row.confidence + rules.contradict) < rules.floor:
            kept = _keep_where_confirmed(view, row, event, envelope) \
                if row.scope == "global" and not demoted else []
            decided += kept[:1]  # demoted first, then superseded, then the copies
            decided.append(LessonSuperseded(lesson_id=row.lesson_id, reason="decayed"))
            decided += kept[1:]
    return decided


def _keep_where_confirmed(view: LessonView, row: LessonRow, event: OutcomeObserved,
                          envelope: Envelope) -> list[AnyEvent]:
    """A global lesson decaying away, kept in the projects where it still held (rule 11).

    Its supporters contradicted it under the floor (a tool changed in some projects, not
    in all); every supporter that confirmed it after those contradictions began, and has
    not contradicted it since, gets a project lesson of its own, as a demotion gives them
    (:func:`_split`): it went on holding there while failing elsewhere. A supporter that
    has not used it since is not kept: the change may reach it too (measured on our own
    trap world, where a shared tool flips everywhere at once, keeping every supporter
    whose last word was a confirmation carried the stale lesson into them, and memory's
    steps a task rose from 3.314 to 3.324). Measured on an independent trap world, a
    project that stayed on its old toolchain confirmed ``pip wheel .`` daily, yet lost the
    lesson when the upgraded projects' contradictions decayed it, and had nothing left.
    The lesson is demoted first, to the last of them: what it said is known not to hold
    everywhere, so neither it nor its copies is promoted again.
    """
    # Each project's last confirmation, and where its run of contradictions began.
    confirmed: dict[str, int] = {}
    began: dict[str, int] = {}
    for move in row.moves:
        if move.type == LESSON_CONFIRMED:
            confirmed[move.note] = move.position
            began.pop(move.note, None)
        elif move.type == LESSON_CONTRADICTED:
            began.setdefault(move.note, move.position)
    since = min(began.values(), default=row.moves[-1].position if row.moves else 0)
    keep = [p for p in row.projects if p != event.project and p not in began
            and confirmed.get(p, -1) > since]
    if not keep:
        return []
    return [LessonDemoted(lesson_id=row.lesson_id, to_scope=keep[-1],
                          outcome_id=event.outcome_id),
            *_copies(view, row, keep, envelope)]


def _split(view: LessonView, row: LessonRow, event: OutcomeObserved,
           envelope: Envelope) -> list[AnyEvent]:
    """A demoted global lesson, kept in every project that supported it (issue 12, rule 2).

    Demotion moves the lesson to its last confirmer; every other project that supported
    it (and is not the one that just contradicted it) gets a project lesson of its own,
    citing its own outcomes, at the confidence it had there. Measured on an independent
    trap world, demoting to one project left the others that relied on the lesson with
    nothing, and they went back to the trap (6 of 30 repeat errors). A lesson ever
    demoted is never promoted again, so the copies stay in their projects.
    """
    return _copies(view, row, [p for p in row.projects[:-1] if p != event.project],
                   envelope)


def copy_id(trigger: UUID, lesson: UUID, project: str) -> UUID:
    """The id of the copy of ``lesson`` made in ``project`` when ``trigger`` demoted it.

    Erasure finds the copies of an erased lesson by it: they repeat its words, and carry
    the trigger's principal and session, not those of the words' owner.
    """
    return derived_id(trigger, f"split|{lesson}|{project}")


def _copies(view: LessonView, row: LessonRow, projects: list[str],
            envelope: Envelope) -> list[AnyEvent]:
    """A project lesson saying what ``row`` says in each of ``projects``, citing its own."""
    copies: list[AnyEvent] = []
    for project in projects:
        evidence = [o for o in row.evidence
                    if o in view.outcomes and view.outcomes[o].project == project]
        if not evidence:
            continue
        copies.append(LessonProposed(
            lesson_id=copy_id(trigger_id(envelope), row.lesson_id, project),
            text=row.text, kind=row.kind, avoid_op=row.avoid_op, prefer_op=row.prefer_op,
            target=row.target, scope=project, source=row.source, derivation=row.derivation,
            longevity=row.longevity,
            fingerprint=dict(row.fingerprint), evidence=evidence,
            confidence=row.confidence))
    return copies


def failed_then_succeeded(operations: list[Operation], blip: Blip = _looks_transient,
                          ) -> list[tuple[Operation, Operation]]:
    """(failed A, then succeeded B) on one target, in order: the loop's cleanest signal.

    When A failed more than once before B worked, the pair carries A's lasting failure if
    it had one (issue 12, rule 3): a timeout followed by ``no rule to make target`` is a
    trap that also blipped, not a blip. Keeping the first failure made such lessons
    tentative, so agents tested them by walking back into the trap (3 of 30 repeat
    errors on an independent world).
    """
    ordered = sorted(operations, key=lambda o: o.order)
    found: dict[tuple[str, str, str], tuple[Operation, Operation]] = {}
    for i, failed in enumerate(ordered):
        if failed.ok:
            continue
        for later in ordered[i + 1:]:
            if later.ok and later.target == failed.target and later.op != failed.op:
                key = (failed.op, later.op, failed.target)
                prior = found.get(key)
                if prior is None or (blip(prior[0]) and not blip(failed)):
                    found[key] = (failed, later)
                break
    return list(found.values())


def teachable(event: OutcomeObserved) -> list[Operation]:
    """The operations the loop may learn a preference from (issue 12, rule 1).

    DESIGN §4 learns only from a passing task. Measured on an independent trap world,
    that left a target that went fail-then-succeed inside a task that failed on another
    target with no lesson, and it was the largest cause of repeated errors (19 of 30),
    and the reason a flip inside a failed task left the stale lesson standing (rule 4).
    A preference is about operations on one target, and the task's verdict is about the
    task: so every target the outcome finished (its last operation succeeded) teaches,
    whether the task passed or not. A task can fail with every target finished too (an
    agent that skipped a known dead end and said so); should the success it learned from
    be a false one, following the lesson contradicts it like any other.
    """
    if event.passed:
        return event.operations
    last: dict[str, Operation] = {}
    for op in sorted(event.operations, key=lambda o: o.order):
        last[op.target] = op
    done = {target for target, op in last.items() if op.ok}
    return [op for op in event.operations if op.target in done]


def dead_ends(operations: list[Operation], blip: Blip = _looks_transient) -> list[Operation]:
    """Operations that failed for a lasting reason on a target nothing worked on (rule 5).

    One per operation (its last lasting failure), in order, and only where at least two
    operations failed so (an alternative was tried and did not work either). Seed 003:
    failed approaches are first-class, with the condition and the symptom. Two things
    keep a failure out:
    a transient-looking error (the world blinked), and an error that different operations
    on the target all gave alike (the target is what failed, a broken test say, not the
    operation: every form of running it reports the same thing).
    """
    ordered = sorted(operations, key=lambda o: o.order)
    worked = {o.target for o in ordered if o.ok}
    found: dict[tuple[str, str], Operation] = {}
    for op in ordered:
        if not op.ok and op.target not in worked and not blip(op):
            found[op.target, op.op] = op
    alike = _alike(ordered)
    tried: dict[str, int] = {}
    for target, _ in found:
        tried[target] = tried.get(target, 0) + 1
    # No alternative worked only if one was tried: a lone failure is no dead end.
    return [op for op in found.values()
            if (op.target, op.error) not in alike and tried[op.target] > 1]


def _retired_covers(view: LessonView, evidence: list[UUID]) -> bool:
    return any(set(evidence) <= set(r.evidence) for r in view.retired())


def _learn(view: LessonView, event: OutcomeObserved, envelope: Envelope,
           decided: list[AnyEvent], blip: Blip) -> list[AnyEvent]:
    learned: list[AnyEvent] = []
    touched = {getattr(d, "lesson_id", None) for d in decided}
    # Contradicted and still standing: one superseded by attribution (decayed, refuted)
    # is not superseded again.
    contradicted = {d.lesson_id for d in decided if isinstance(d, LessonContradicted)} - {
        d.lesson_id for d in decided if isinstance(d, LessonSuperseded)}
    pairs = failed_then_succeeded(teachable(event), blip)
    solid = {(w.target, w.op) for f, w in pairs if not blip(f)}
    # The view does not move while a policy decides: one read of the project's lessons.
    ends = dead_ends(event.operations, blip)
    # Only lessons on the targets they name are read below (``same_as``, ``target``).
    here = view.active_for(event.project, targets={f.target for f, _ in pairs}
                           | {e.target for e in ends}) if pairs or ends else []
    for failed, worked in pairs:
        same = ("prefer", failed.op, worked.op, failed.target)
        transient = blip(failed)
        known = [r for r in here if r.same_as == same]
        if known and not (known[0].longevity == "tentative" and not transient):
            if known[0].lesson_id not in touched:
                learned.append(LessonConfirmed(lesson_id=known[0].lesson_id,
                                               outcome_id=event.outcome_id,
                                               project=event.project))
            continue
        if transient and ((worked.target, worked.op) in solid or any(
                r.target == worked.target and r.prefer_op == worked.op
                and r.longevity != "tentative" for r in here)):
            continue  # a blip on the way to what is already known to work teaches nothing
        if transient and any(r.target == failed.target and r.prefer_op == failed.op
                             and r.longevity != "tentative" for r in here):
            # Nor does a blip of what a settled lesson here vouches for: measured on the
            # transient-then-lasting world, such lessons were never tested (the agent
            # keeps using the vouched-for form) and most of the blip lessons still active.
            continue
        if _retired_covers(view, [event.outcome_id]):
            continue
        lesson_id = derived_id(trigger_id(envelope), "|".join(same))
        # Replaced: a tentative lesson this structural failure shows was right after all,
        # or, when the world flipped, the lessons this outcome just contradicted that said
        # the opposite: the chain then shows both the old and the new evidence.
        # Only the project's own: a global lesson contradicted here still holds where it
        # was learned, and this project's new lesson overrules it here (issue 12, rule 2).
        stale = [r for r in here if r.lesson_id in contradicted and r.target == failed.target
                 and r.scope == event.project
                 and (r.prefer_op == failed.op or r.avoid_op == worked.op)]
        # The exact reverse, when there is one, is what the new lesson supersedes.
        stale.sort(key=lambda r: r.same_as != ("prefer", worked.op, failed.op, failed.target))
        if known:
            stale = [known[0], *stale]
        learned.append(LessonProposed(
            lesson_id=lesson_id,
            text=f"Prefer `{worked.op}` over `{failed.op}` for {failed.target}"
                 + (f" ({failed.error})" if failed.error else ""),
            kind="prefer", avoid_op=failed.op, prefer_op=worked.op, target=failed.target,
            scope=event.project, source="loop",
            derivation="hypothesis" if transient else "direct",
            longevity="tentative" if transient else "ongoing",
            fingerprint=dict(event.fingerprint), evidence=[event.outcome_id],
            confidence=view.rules.start_loop,
            supersedes=stale[0].lesson_id if stale else None,
        ))
        learned += [LessonSuperseded(lesson_id=r.lesson_id, reason="replaced", by=lesson_id)
                    for r in stale]
        contradicted -= {r.lesson_id for r in stale}
    learned += _avoid(view, event, envelope, ends, here, touched)
    return learned


def _avoid(view: LessonView, event: OutcomeObserved, envelope: Envelope,
           ends: list[Operation], here: list[LessonRow], touched: set[object]) -> list[AnyEvent]:
    """``avoid A for T``: A failed for a lasting reason and nothing worked on T (rule 5).

    DESIGN §4 only learns preferences, so an operation with no working alternative was
    tried again in every session (seed 003's dead end). Negative lessons are more often
    wrong than positive ones, so they start lower (``Rules.start_avoid``): one
    contradiction (the operation working) takes them under the floor, and unused they
    decay away sooner. They are never promoted from a single sighting's scope either:
    promotion needs a second project to learn the same, as for any lesson.
    """
    learned: list[AnyEvent] = []
    for failed in ends:
        same = ("avoid", failed.op, "", failed.target)
        known = [r for r in here if r.same_as == same]
        if known:
            if known[0].lesson_id not in touched:
                learned.append(LessonConfirmed(lesson_id=known[0].lesson_id,
                                               outcome_id=event.outcome_id,
                                               project=event.project))
            continue
        if _retired_covers(view, [event.outcome_id]):
            continue
        lesson_id = derived_id(trigger_id(envelope), "|".join(same))
        learned.append(LessonProposed(
            lesson_id=lesson_id,
            text=f"Avoid `{failed.op}` for {failed.target}; nothing else worked there either"
                 + (f" ({failed.error})" if failed.error else ""),
            kind="avoid", avoid_op=failed.op, prefer_op="", target=failed.target,
            scope=event.project, source="loop", derivation="direct", longevity="ongoing",
            fingerprint=dict(event.fingerprint), evidence=[event.outcome_id],
            confidence=view.rules.start_avoid))
    return learned


def trigger_id(envelope: Envelope) -> UUID:
    """The trigger's event id as a UUID (positions stand in when a publisher gave none)."""
    if envelope.event_id:
        return UUID(bytes=envelope.event_id)
    return UUID(int=envelope.position)


def _promote(view: LessonView, new: LessonRow) -> list[AnyEvent]:
    """An equivalent lesson is already active: absorb the new one, or make both global.

    In the new lesson's own scope, or globally, the lesson already on file absorbs it: the
    new one is superseded and its evidence confirms the old one. A serial run rarely
    proposes such a lesson (the outcome would have confirmed the one on file), but agents
    in several processes do: a policy's events land after its trigger, not right behind
    it, so a second outcome showing the same pair can be folded before the first one's
    lesson and teach it again. In another project's scope it is a second project learning
    the lesson: one global lesson absorbs both. A tentative lesson is never promoted, nor
    is one known not to hold everywhere: a lesson saying the same was demoted before (a
    third project contradicted it), or an active lesson somewhere says the opposite.
    """
    if not new.active or new.scope == "global":
        return []
    # An edit's new lesson replaces its original; it is never absorbed by it.
    equivalent = [other for other in view.active_like(new.same_as)
                  if other.lesson_id not in (new.lesson_id, new.supersedes)]
    for other in equivalent:
        if other.scope in (new.scope, "global"):
            # One outcome, one attribution: evidence it already has confirms nothing.
            return [LessonSuperseded(lesson_id=new.lesson_id, reason="replaced",
                                     by=other.lesson_id),
                    *(LessonConfirmed(lesson_id=other.lesson_id, outcome_id=o,
                                      project=new.scope) for o in new.evidence[:1]
                      if o not in other.evidence)]
    if new.longevity == "tentative":
        return []
    # A dead end the loop saw is a fact about one project (seed 003: negative items are
    # far more context-dependent than positive ones): it is never made global.
    if new.kind == "avoid" and new.source == "loop":
        return []
    # Known not to hold everywhere: demoted before, or some project found the opposite.
    if view.demoted(new.same_as) or view.disagreeing(new):
        return []
    for other in equivalent:
        if other.longevity != "tentative":
            return [
                LessonPromoted(lesson_id=other.lesson_id, projects=[other.scope, new.scope],
                               merged=[new.lesson_id]),
                LessonSuperseded(lesson_id=new.lesson_id, reason="replaced",
                                 by=other.lesson_id),
            ]
    return []
