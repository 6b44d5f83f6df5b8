"""The code stays ruff clean and passes mypy --strict, checked as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ledger", "projections", "commands", "sync", "ops")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    # mypy refuses -p with files, so the installed packages and the tests are two runs.
    # The package's top (installed from ops/package_init.py) is a module of its own.
    # The two runs share a cache made fresh for this test (never the checkout's
    # .mypy_cache, which may be stale): the tests' run then reads the package, and the
    # stubs of numpy and the rest, from what the first run wrote instead of checking all
    # of it again (a third less time), with the same result as a run from nothing.
    packages = [arg for name in PACKAGES for arg in ("-p", f"lessonledger.{name}")]
    packages += ["-m", "lessonledger"]
    for args in (packages, ["tests"]):
        result = _run("mypy", "--cache-dir", str(tmp_path / "mypy-cache"), *args)
        assert result.returncode == 0, result.stdout + result.stderr
