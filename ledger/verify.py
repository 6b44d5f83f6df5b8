"""Recompute the hash chain and every body commitment, and name what does not match.

An absent body is reported as erased, not as damage, when an ``Erased`` record of the
same log names its position: erasure deletes bodies on purpose, records which, and
leaves envelopes and chain intact, so the rest of the history still verifies. A body
gone that no erasure names is damage (deleted by hand, lost or withheld by a bad copy).
So is an ``Erased`` record's own body gone: erasure never takes one (the records are the
audit trail and what replicas apply), and without it nothing tells the positions it named
from damage, so those are reported too. An eventsourcing application's log holds no
``Erased`` records, so every body missing there is damage.

A record naming its own position or a later one (one that does not exist yet, or did not
when it was written) is damage, reported at the record, and explains none of those: an
erasure only takes what came before it. This detects damage and careless forgery, not a
forger with write access to the file: the chain has no key, so whoever can write the file
can append a plausible ``Erased`` record (naming earlier positions) and delete those bodies.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from hashlib import sha256
from typing import Literal

import msgspec
from lessonledger.ledger.envelope import GENESIS, SALT_BYTES, decode_envelope
from lessonledger.ledger.events import Erased, decode_event
from lessonledger.ledger.log import EventLog

__all__ = ["Finding", "VerifyReport", "verify"]

_PROGRESS_EVERY = 8192
_ERASED: str = Erased.__struct_config__.tag  # type: ignore[assignment]
_LOST_ERASURE = ("the body of an erasure record is missing (erasure never takes one); "
                 "the positions it erased cannot be told from damage")


class Finding(msgspec.Struct, frozen=True):
    """One thing that does not verify.

    Attributes:
        position: where it is.
        kind: ``envelope`` (envelope or its chain link altered), ``body`` (body does not
            match its commitment), ``missing`` (a position has no envelope).
        detail: what was found, in words.
    """

    position: int
    kind: Literal["envelope", "body", "missing"]
    detail: str


class VerifyReport(msgspec.Struct):
    """What verification found.

    Attributes:
        head: the last position the log has assigned.
        checked: how many envelopes were checked.
        erased: positions whose bodies an ``Erased`` record says it erased (not damage).
        problems: everything that failed, in position order.
        withheld: positions whose bodies a partial replica was not sent (its key may not
            read them): not damage either.
        chain: the chain link of the last envelope, hex (empty for an empty log): a
            copy that verifies and ends at the same link holds the same history, so an
            operator can pin it (``import --expect-chain``).
    """

    head: int
    checked: int = 0
    erased: list[int] = msgspec.field(default_factory=list)
    problems: list[Finding] = msgspec.field(default_factory=list)
    withheld: list[int] = msgspec.field(default_factory=list)
    chain: str = ""

    @property
    def ok(self) -> bool:
        """True when nothing is damaged (bodies an erasure names are fine)."""
        return not self.problems


def verify(log: EventLog, progress: Callable[[int, int], None] | None = None, *,
           withheld: Collection[int] = (), erased_later: Collection[int] = ()
           ) -> VerifyReport:
    """Check every envelope's chain link and every present body's commitment.

    Args:
        log: the log to check.
        progress: called as ``progress(done, total)`` every few thousand events.
        withheld: positions whose bodies a partial replica's hub did not send.
        erased_later: positions a checked-out home lacks because an erasure after its
            snapshot took them (recorded by the checkout, see ``lessonledger.sync``).
    """
    report = VerifyReport(head=log.head())
    withheld, erased_later = frozenset(withheld), frozenset(erased_later)
    previous: bytes = GENESIS
    # After a mismatch at p: the link p should have had. If position p + 1 chains from
    # it, only the stored link at p was altered and p + 1 is intact.
    should_have_been: bytes | None = None
    expected = 1
    absent: list[int] = []  # bodies gone, erased or not: told apart once all is read
    named: set[int] = set()  # what the log's Erased records say they erased
    for position, envelope_bytes, body, link in log.raw():
        if position > expected:
            report.problems.extend(
                Finding(p, "missing", "no envelope at this position")
                for p in range(expected, position)
            )
        expected = position + 1
        report.checked += 1
        recomputed = sha256(previous + envelope_bytes).digest()
        if (link is not None and recomputed != link and should_have_been is not None
                and sha256(should_have_been + envelope_bytes).digest() == link):
            recomputed = link
        should_have_been = None
        if link is None or recomputed != link:
            report.problems.append(
                Finding(position, "envelope", "envelope or its chain link was altered")
            )
            should_have_been = recomputed
        previous = link if link is not None else recomputed
        _check_body(report, position, envelope_bytes, body, absent, named)
        if progress is not None and report.checked % _PROGRESS_EVERY == 0:
            progress(report.checked, report.head)
    report.problems.extend(
        Finding(p, "missing", "no envelope at this position")
        for p in range(expected, report.head + 1)
    )
    for p in absent:
        if p in named or p in erased_later:
            report.erased.append(p)
        elif p in withheld:
            report.withheld.append(p)
        else:
            report.problems.append(Finding(p, "body", "body is missing and no erasure names it"))
    report.problems.sort(key=lambda f: f.position)
    report.chain = previous.hex() if report.checked else ""
    if progress is not None:
        progress(report.checked, report.head)
    return report


def _check_body(report: VerifyReport, position: int, envelope_bytes: bytes,
                body: bytes | None, absent: list[int], named: set[int]) -> None:
    try:
        envelope = decode_envelope(envelope_bytes)
    except msgspec.DecodeError:
        report.problems.append(Finding(position, "envelope", "envelope does not decode"))
        return
    if envelope.position != position:
        report.problems.append(Finding(
            position, "envelope", f"envelope claims position {envelope.position}"
        ))
    if body is None:
        if envelope.type == _ERASED:
            report.problems.append(Finding(position, "body", _LOST_ERASURE))
        else:
            absent.append(position)
    elif sha256(body).digest() != envelope.commitment:
        report.problems.append(Finding(position, "body", "body does not match its commitment"))
    elif envelope.type == _ERASED:
        # Only an intact record counts: one that fails its commitment explains nothing.
        try:
            event = decode_event(body[SALT_BYTES:])
        except msgspec.DecodeError:
            return  # another writer's event of that name: it names no erasure
        if isinstance(event, Erased):
            # An erasure takes bodies already in the log: a position at or after its
            # record's own (a later one, one not yet assigned) is a forgery or damage.
            later = sorted({p for p in event.positions if p >= position})
            if later:
                shown = ", ".join(map(str, later[:5])) + (", ..." if len(later) > 5 else "")
                report.problems.append(Finding(position, "body", (
                    f"the erasure record names {len(later)} position(s) at or after its own "
                    f"({shown}); an erasure only takes what came before it")))
            named.update(p for p in event.positions if p < position)
