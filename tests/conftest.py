"""Session checks and shared fixtures.

Tests run against the installed ``lessonledger``; the first thing a session does is make
sure that install matches this checkout, so nobody tests stale code by mistake.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SUBPACKAGES = ("ledger", "projections", "commands", "sync", "ops")

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _moved() -> dict[str, str]:
    """Checkout files the wheel installs elsewhere (the package's top: see pyproject)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        wheel = tomllib.load(f)["tool"]["hatch"]["build"]["targets"]["wheel"]
    return dict(wheel.get("force-include", {}))


def _digests(top: Path, moved: dict[str, str]) -> dict[str, str]:
    files = [p.relative_to(top) for sub in SUBPACKAGES for p in sorted((top / sub).rglob("*"))
             if p.is_file() and (p.suffix == ".py" or p.name == "py.typed")]
    files += [Path(target) for target in moved.values() if (top / target).is_file()]
    return {moved.get(str(path), str(path)): hashlib.sha256((top / path).read_bytes()).hexdigest()
            for path in files}


def pytest_sessionstart(session: pytest.Session) -> None:
    import lessonledger.ledger

    installed = Path(lessonledger.ledger.__file__).resolve().parent.parent
    moved = _moved()
    if _digests(installed, moved) != _digests(ROOT, moved):
        pytest.exit("installed lessonledger is stale: run `pip install --no-deps .`", returncode=2)


@pytest.fixture
def home(tmp_path: Path) -> str:
    """A fresh ledger home directory."""
    return str(tmp_path / "home")


@pytest.fixture(scope="session")
def demo_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The home ``lessonledger demo`` leaves, made once a session: never change it.

    Tests that change it take :func:`demo_copy`, a copy of their own.
    """
    from lessonledger.ops.cli import main

    home = tmp_path_factory.mktemp("demo") / "home"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--home", str(home), "demo"]) == 0
    return home


@pytest.fixture
def demo_copy(demo_built: Path, tmp_path: Path) -> Path:
    """A copy of the demo's home at ``tmp_path / "home"``, this test's own to change.

    The demo's world is seeded and dated by its own calendar, so a copy holds the story a
    fresh run would write; the session runs it once instead of once a test.
    """
    home = tmp_path / "home"
    shutil.copytree(demo_built, home)
    return home
