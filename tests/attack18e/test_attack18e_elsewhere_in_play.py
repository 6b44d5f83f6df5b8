"""attack18e: a global lesson bound elsewhere is still judged, and demoted, where it says nothing.

README rule 11: "A global lesson bound to another environment says nothing there. Where
a project's outcomes last reported another value of a fingerprint component than a
global lesson is bound to, that lesson is neither recalled nor checked there"; rule 6:
"Global lessons are not touched by one project's upgrade." attack18b #7 (fixed for the
listing only, commands/read_side.py ``lessons`` -> ``holding_here``): "an outcome where
it says nothing demoted it everywhere".

The listing now hides it, but attribution does not ask ``holding_here``: an agent in P3
(on py 3.12, the global lesson bound to 3.11) that names the lesson in ``in_play`` (it
read it with ``lessons show``, or was shown it before its upgrade in the same session)
has its 3.12 outcome contradict the lesson, and the lesson is demoted out of global for
P1 and P2, where it still holds. Suspected: commands/policies.py ``_in_play`` /
``_attribute`` take every named/recalled global lesson, bound here or not.
"""

from __future__ import annotations

from pathlib import Path

from _attack18e_agent import AVOID, P1, P2, P3, Agent, day, ok
from lessonledger.commands import open_ledger


def test_a_named_global_lesson_bound_elsewhere_is_not_demoted_from_there(
        tmp_path: Path) -> None:
    with open_ledger(tmp_path, sync=False) as led:
        agent = Agent(led)
        lid = agent.learn(P1, "s1", when=day(0), fingerprint={"py": "3.11"})
        agent.learn(P2, "s2", when=day(1), fingerprint={"py": "3.11"})
        agent.outcome(P3, "s3", [ok("make", "docs")], when=day(2), fingerprint={"py": "3.12"})
        assert led.lesson(lid).scope == "global"
        assert lid not in [r.lesson_id for r in led.lessons(P3, record=False)]
        agent.outcome(P3, "s4", [ok(AVOID)], when=day(3), fingerprint={"py": "3.12"},
                      in_play=[lid])
        row = led.lesson(lid)
        assert row.scope == "global", [(m.type, m.note[:12]) for m in row.moves]
