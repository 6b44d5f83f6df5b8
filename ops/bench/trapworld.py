"""The trap world: projects, the targets in them, the ways to act on each, and which work.

Everything is decided by the seed, so two runs of one configuration see the same world and
the same bad luck. The world is the bench's only source of truth; agents (and the ledger
behind them) learn about it only by trying operations and reading the errors.

- Every target kind has a few **forms** (the operations that act on it), listed in the
  order an agent with no memory tries them: its *habit*.
- A **trap** is a (project, target) where the habit's first form fails with a structural
  error and another form works. Some kinds are **shared**: their trap and its way out are
  the same in every project that has them (a second project learning it makes it global).
  The others are **local**: each project draws its own truth, so what works in one can
  fail in another (a lesson leaking across projects hurts).
- Some forms beside the one that works also work (``pytest`` and ``python -m pytest``).
- **Noise**: an attempt that would succeed fails instead, with a transient-looking error
  (timeout, reset, rate limit, 5xx), at the configured rate. Retrying it works.
- **Flips**: on the flip day, a share of traps turn over: the once-failing form works
  and the once-working form fails. A shared kind flips in every project at once (a tool
  changed), a local one in its project alone (the repository changed).

**World families** (issue 12; :data:`FAMILIES`): ``default`` is the world above; each
other family turns on one knob of :class:`WorldConfig` that the default leaves off, each
aimed at a way memory went wrong on a world built independently of this one:

- ``per-project-flips``: shared kinds flip in one project at a time, each on a day of its
  own, and not at all in the rest (a lesson that went global stays right elsewhere).
- ``failing-tasks``: on many days one of the task's targets is broken: every form of it
  fails with the same error (a failing test), so the task fails while its other targets
  go fail-then-succeed as usual.
- ``transient-then-lasting``: a form that fails for good first blips, half the time, on
  its first try in a step; agents retry a blip once, and then meet the lasting error.
- ``dead-ends``: some local targets have no working form at all; the right advice is to
  avoid them and report, not to try every form again.
- ``fingerprints``: some projects upgrade their toolchain on a day of their own, which
  the outcomes' fingerprints show (``toolchain: 1`` then ``2``) and nothing else does;
  there every trap of a shared kind flips, elsewhere none does.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass, field, fields

__all__ = ["BROKEN_ERROR", "FAMILIES", "FORMS", "TRANSIENT_ERRORS", "Task", "Truth", "World",
           "WorldConfig", "family_config"]

#: Target kind → its forms in habit order, each with the error it fails with here.
FORMS: dict[str, tuple[tuple[str, str], ...]] = {
    "tests": (("pytest tests/", "ERROR: no conftest.py found; rootdir is not the repo root"),
              ("pytest", "ERROR: file or directory not found: tests/unit"),
              ("python -m pytest", "ModuleNotFoundError: No module named 'app'"),
              ("tox -e py", "ERROR: tox.ini not found in the working directory")),
    "build": (("make", "make: *** No rule to make target 'all'. Stop."),
              ("ninja -C build", "ninja: error: loading 'build.ninja': No such file"),
              ("python -m build", "ERROR Backend 'setuptools.build_meta' is not available"),
              ("scripts/build.sh", "scripts/build.sh: Permission denied")),
    "lint": (("ruff check .", "ruff: unknown rule selector 'E999' in pyproject.toml"),
             ("flake8", "flake8: error: unrecognized arguments: --max-line-length=100"),
             ("pre-commit run --all-files", "An error has occurred: InvalidConfigError")),
    "types": (("mypy .", "mypy: error: Duplicate module named 'conftest'"),
              ("mypy src", "mypy: can't read file 'src': No such file or directory"),
              ("pyright", "pyright: No configuration file found; 214 errors")),
    "docs": (("sphinx-build docs out", "Extension error: Unknown directive type 'autoapi'"),
             ("make -C docs html", "make: *** No rule to make target 'html'. Stop."),
             ("mkdocs build", "Config file 'mkdocs.yml' does not exist")),
    "deps": (("pip install -r requirements.txt", "ERROR: Could not open requirements file"),
             ("pip install -e .", "ERROR: File 'setup.py' or 'setup.cfg' not found"),
             ("uv sync", "error: No `pyproject.toml` found in current directory")),
    "migrate": (("alembic upgrade head", "FAILED: Can't locate revision identified by 'a1b2'"),
                ("python manage.py migrate", "No module named 'django'"),
                ("scripts/migrate.sh", "scripts/migrate.sh: line 3: DATABASE_URL: unbound")),
    "deploy": (("kubectl apply -f k8s/", "error: the path 'k8s/' does not exist"),
               ("helm upgrade app chart/", "Error: chart.yaml file is missing"),
               ("scripts/deploy.sh", "scripts/deploy.sh: missing env file .env.deploy")),
    "format": (("black .", "black: error: cannot format: INTERNAL ERROR"),
               ("ruff format .", "ruff: format: invalid target-version 'py27'"),
               ("yapf -ir .", "yapf: style config not found")),
    "bench": (("pytest --benchmark-only", "pytest: error: unrecognized arguments"),
              ("python -m asv run", "asv: asv.conf.json is missing"),
              ("scripts/bench.sh", "scripts/bench.sh: hyperfine: command not found")),
}

#: What a passing failure looks like: the ledger must tell these from a wrong approach.
TRANSIENT_ERRORS = (
    "ReadTimeout: HTTPSConnectionPool read timed out (read timeout=30)",
    "ConnectionResetError: [Errno 104] Connection reset by peer",
    "HTTP 429 Too Many Requests: rate limit exceeded, try again in 20s",
    "503 Service Unavailable from registry",
    "ETIMEDOUT while fetching the package index",
)

#: What every form of a broken target fails with (``failing-tasks``): the code, not the form.
BROKEN_ERROR = "FAILED tests/test_checkout.py::test_total - AssertionError: 41 != 42"

_VERBS = ("fix", "add", "rename", "speed up", "refactor", "document", "remove", "port")
_NOUNS = ("the cart total", "a discount rule", "the tax module", "checkout", "empty carts",
          "the login flow", "the export job", "rate limiting", "the search index", "caching")


@dataclass(frozen=True)
class WorldConfig:
    """The knobs of a world; the defaults are the world the README's figures come from."""

    seed: int = 0
    projects: int = 12
    #: Target kinds each project has (of the ten there are).
    targets: int = 5
    #: Sessions per project, one per simulated day.
    sessions: int = 40
    #: Targets one task touches.
    steps: int = 3
    #: Share of a local kind's (project, target) pairs that are traps.
    trap_rate: float = 0.6
    #: Share of target kinds whose trap is the same in every project.
    shared_rate: float = 0.4
    #: Share of traps that flip on the flip day.
    flip_rate: float = 0.3
    #: Where in the sessions the flips happen (0..1).
    flip_at: float = 0.5
    #: Chance that an attempt which would succeed fails transiently instead.
    noise: float = 0.05
    #: The family these knobs make (see :data:`FAMILIES`); only a label.
    family: str = "default"
    #: Share of (project, shared kind) pairs that flip on a day of their own; when set,
    #: shared kinds no longer flip everywhere at once (``per-project-flips``).
    staggered: float = 0.0
    #: Chance that one target of a day's task is broken: every form fails alike.
    broken: float = 0.0
    #: Chance that a form which fails for good blips on its first try in a step.
    pre_blip: float = 0.0
    #: Whether agents retry a form once right after it failed the way a blip does.
    retry_blips: bool = False
    #: Share of a local kind's plain targets where no form works at all.
    dead: float = 0.0
    #: Share of projects that upgrade their toolchain on a day of their own, which
    #: flips every shared trap there (and shared kinds no longer flip elsewhere).
    upgrades: float = 0.0

    @property
    def flip_day(self) -> int:
        """The first day of the flipped world."""
        return int(self.sessions * self.flip_at)


#: Each family's knobs (on top of the default world's).
FAMILIES: dict[str, dict[str, float | bool]] = {
    "default": {},
    "per-project-flips": {"staggered": 0.5},
    "failing-tasks": {"broken": 0.4},
    "transient-then-lasting": {"pre_blip": 0.5, "retry_blips": True},
    "dead-ends": {"dead": 0.4},
    "fingerprints": {"upgrades": 0.5},
}


def family_config(config: WorldConfig, family: str) -> WorldConfig:
    """``config`` with a family's knobs set (the family's, not the caller's, for those)."""
    knobs = {f.name: f.default for f in fields(WorldConfig)
             if f.name in {k for v in FAMILIES.values() for k in v}}
    return WorldConfig(**{**asdict(config), **knobs, **FAMILIES[family], "family": family})


@dataclass(frozen=True)
class Truth:
    """Which forms of one target work in one project, before and after the flip day."""

    before: frozenset[int]
    after: frozenset[int]
    #: The day it flips when not the world's flip day (-1: the world's).
    day: int = -1

    @property
    def trap(self) -> bool:
        """True when the habit's first form fails here."""
        return 0 not in self.before

    @property
    def flips(self) -> bool:
        """True when this target turns over on the flip day."""
        return self.before != self.after


@dataclass(frozen=True)
class Task:
    """One session's task: a title and the targets it must act on, in order."""

    title: str
    kinds: tuple[str, ...]

    @property
    def query(self) -> str:
        """What the agent asks recall at plan time: the task and what it will touch."""
        return f"{self.title}: {', '.join(self.kinds)}"


def _flipped(works: frozenset[int], way_out: int) -> frozenset[int]:
    """The trap turned over: the habit's form works, the way out fails."""
    return (works - {way_out}) | {0}


@dataclass
class World:
    """A generated world; :meth:`attempt` is the only way anyone learns its truth."""

    config: WorldConfig
    projects: list[str] = field(default_factory=list)
    kinds: dict[str, tuple[str, ...]] = field(default_factory=dict)
    truth: dict[tuple[str, str], Truth] = field(default_factory=dict)
    shared: frozenset[str] = frozenset()
    #: Projects that upgrade their toolchain (``fingerprints``), and the day they do.
    upgraded: dict[str, int] = field(default_factory=dict)

    @classmethod
    def generate(cls, config: WorldConfig) -> World:
        """The world a configuration (its seed included) describes."""
        rng = random.Random(f"trapworld/{config.seed}")
        all_kinds = sorted(FORMS)
        shared = frozenset(rng.sample(all_kinds, round(config.shared_rate * len(all_kinds))))
        world = cls(config, shared=shared)
        for i in range(config.projects):
            project = hashlib.sha256(f"trapworld/{config.seed}/{i}".encode()).hexdigest()[:32]
            world.projects.append(project)
            kinds = tuple(sorted(rng.sample(all_kinds, min(config.targets, len(all_kinds)))))
            world.kinds[project] = kinds
        for kind in all_kinds:
            having = [p for p in world.projects if kind in world.kinds[p]]
            truths = (_shared(rng, kind, len(having), config) if kind in shared
                      else _local(rng, kind, len(having), config))
            world.truth.update(((p, kind), t) for p, t in zip(having, truths, strict=True))
        world._families()
        return world

    def _families(self) -> None:
        """Apply the family knobs.

        They draw from a random stream of their own, so the default world's draws stay as
        they were.
        """
        config = self.config
        rng = random.Random(f"trapworld/{config.seed}/families")
        early, late = int(config.sessions * 0.25), max(int(config.sessions * 0.85), 1)
        upgraded: dict[str, int] = {}
        if config.upgrades:
            for project in self.projects:
                if rng.random() < config.upgrades:
                    upgraded[project] = rng.randint(early, late)
            self.upgraded = upgraded
        for (project, kind), truth in sorted(self.truth.items()):
            if kind in self.shared and (config.staggered or config.upgrades):
                still = Truth(truth.before, truth.before)
                if config.staggered and rng.random() < config.staggered:
                    still = Truth(truth.before, _flipped(truth.before, min(truth.before)),
                                  rng.randint(early, late))
                elif project in upgraded:
                    still = Truth(truth.before, _flipped(truth.before, min(truth.before)),
                                  upgraded[project])
                self.truth[project, kind] = still
            elif kind not in self.shared and config.dead and not truth.trap \
                    and rng.random() < config.dead:
                self.truth[project, kind] = Truth(frozenset(), frozenset())

    def flip_day_of(self, project: str, kind: str) -> int:
        """The day a target turns over (whether or not it does)."""
        day = self.truth[project, kind].day
        return day if day >= 0 else self.config.flip_day

    def flipped(self, project: str, kind: str, day: int) -> bool:
        """True when the target has turned over by ``day``."""
        return self.truth[project, kind].flips and day >= self.flip_day_of(project, kind)

    def works(self, project: str, kind: str, day: int) -> frozenset[int]:
        """The forms of a target that work in a project on a day."""
        truth = self.truth[project, kind]
        return truth.after if day >= self.flip_day_of(project, kind) else truth.before

    def broken(self, project: str, day: int) -> str:
        """The target of the day's task that is broken (every form fails alike), or ''."""
        if not self.config.broken:
            return ""
        luck = _unit(f"broken/{self.config.seed}/{project}/{day}")
        if luck >= self.config.broken:
            return ""
        kinds = self.task(project, day).kinds
        return kinds[int(luck / self.config.broken * len(kinds))]

    def fingerprint(self, project: str, day: int) -> dict[str, str]:
        """What an agent's environment reports: the toolchain's version, where it shows."""
        if not self.config.upgrades:
            return {}
        day_of = self.upgraded.get(project)
        return {"toolchain": "2" if day_of is not None and day >= day_of else "1"}

    def attempt(self, project: str, kind: str, form: int, day: int, nth: int,
                again: int = 0) -> tuple[bool, str]:
        """Try a form: (succeeded, error).

        ``nth`` numbers the attempts in the step, so the same attempt meets the same luck
        whichever agent makes it; ``again`` counts the earlier tries of this form in it.
        """
        config = self.config
        if config.broken and self.broken(project, day) == kind:
            return False, BROKEN_ERROR
        if form not in self.works(project, kind, day):
            if again == 0 and config.pre_blip:
                luck = _unit(f"pre/{config.seed}/{project}/{kind}/{day}/{form}")
                if luck < config.pre_blip:
                    return False, TRANSIENT_ERRORS[int(luck / config.pre_blip
                                                       * len(TRANSIENT_ERRORS))]
            return False, FORMS[kind][form][1]
        luck = _unit(f"{config.seed}/{project}/{kind}/{day}/{nth}")
        if luck < config.noise:
            return False, TRANSIENT_ERRORS[int(luck / config.noise * len(TRANSIENT_ERRORS))]
        return True, ""

    def task(self, project: str, day: int) -> Task:
        """A project's task on a day."""
        rng = random.Random(f"trapworld/{self.config.seed}/{project}/{day}")
        kinds = self.kinds[project]
        chosen = tuple(rng.sample(kinds, min(self.config.steps, len(kinds))))
        return Task(f"{rng.choice(_VERBS)} {rng.choice(_NOUNS)}", chosen)

    def op(self, kind: str, form: int) -> str:
        """A form's operation key."""
        return FORMS[kind][form][0]

    def form(self, kind: str, op: str) -> int:
        """The form an operation key names."""
        return [key for key, _ in FORMS[kind]].index(op)


def _shared(rng: random.Random, kind: str, count: int, config: WorldConfig) -> list[Truth]:
    """A shared trap: the same truth, and the same flip, in every project with the kind."""
    forms = range(1, len(FORMS[kind]))
    way_out = rng.choice(forms)
    works = frozenset({way_out, rng.choice(forms)} if rng.random() < 0.3 else {way_out})
    flips = rng.random() < config.flip_rate
    return [Truth(works, _flipped(works, way_out) if flips else works)] * count


def _local(rng: random.Random, kind: str, count: int, config: WorldConfig) -> list[Truth]:
    """Each project's own truth for a kind that differs between projects.

    Traps have ways out no other project's trap shares (so a lesson from one is wrong in
    the other traps: what works in one fails in the rest); a plain target works by habit,
    and half the time by one alternative as well.
    """
    free = list(range(1, len(FORMS[kind])))
    rng.shuffle(free)
    truths: list[Truth] = []
    for _ in range(count):
        if free and rng.random() < config.trap_rate:
            works = frozenset({free.pop()})
            flips = rng.random() < config.flip_rate
            truths.append(Truth(works, _flipped(works, min(works)) if flips else works))
        else:
            truths.append(Truth(frozenset(), frozenset()))  # plain: filled in below
    alternatives = range(1, len(FORMS[kind]))
    plain = [frozenset({0, rng.choice(alternatives)}) if rng.random() < 0.5 else frozenset({0})
             for _ in truths]
    return [t if t.before else Truth(w, w) for t, w in zip(truths, plain, strict=True)]


def _unit(text: str) -> float:
    """A number in [0, 1) fixed by ``text``."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64
