"""``lessonledger.project_id``: one digest per project, whatever form its remote takes.

Every client must compute the same digest, so the expected values here are the documented
hash computed by hand, not by the function under test.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import lessonledger
import pytest
from lessonledger.ops.project import normalised_remote


def _git_id(canonical: str) -> str:
    return hashlib.sha256(f"git:{canonical}".encode()).hexdigest()[:32]


def _path_id(path: Path) -> str:
    return hashlib.sha256(f"path:{os.path.realpath(path)}".encode()).hexdigest()[:32]


def _repo(path: Path, *remotes: tuple[str, str]) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for name, url in remotes:
        subprocess.run(["git", "-C", str(path), "remote", "add", name, url], check=True)
    return path


@pytest.mark.parametrize(("url", "canonical"), [
    ("git@github.com:acme/widgets.git", "github.com/acme/widgets"),
    ("git@GitHub.COM:acme/widgets", "github.com/acme/widgets"),
    ("https://github.com/acme/widgets.git", "github.com/acme/widgets"),
    ("https://alice:s3cret@github.com/acme/widgets/", "github.com/acme/widgets"),
    ("ssh://git@github.com:22/acme/widgets.git", "github.com/acme/widgets"),
    ("git://GITHUB.com/acme/widgets.git/", "github.com/acme/widgets"),
    ("https://gitlab.example.com:8443/Group/Sub%20Group/Repo.git",
     "gitlab.example.com/Group/Sub Group/Repo"),
    ("  git@host.example:~user/repo.git\n", "host.example/~user/repo"),
])
def test_a_remote_is_normalised_as_documented(url: str, canonical: str) -> None:
    assert normalised_remote(url) == canonical


def test_local_remotes_are_real_paths(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    real = str(tmp_path.resolve() / "srv" / "widgets")
    for url in (f"{tmp_path}/srv/widgets.git", f"file://{tmp_path}/srv/widgets.git",
                "../srv/widgets.git"):
        assert normalised_remote(url, tmp_path / "work") == real, url


def test_origin_is_the_remote_else_the_first_by_name_else_the_path(tmp_path: Path) -> None:
    both = _repo(tmp_path / "both", ("backup", "git@b.example:x/y"),
                 ("origin", "https://github.com/acme/widgets.git"))
    assert lessonledger.project_id(both) == _git_id("github.com/acme/widgets")
    other = _repo(tmp_path / "other", ("zeta", "git@z.example:x/z"),
                  ("alpha", "git@a.example:x/a"))
    assert lessonledger.project_id(other) == _git_id("a.example/x/a")
    bare = _repo(tmp_path / "bare")
    (bare / "deep" / "er").mkdir(parents=True)
    assert lessonledger.project_id(bare / "deep" / "er") == _path_id(bare), "the work tree's top"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert lessonledger.project_id(plain) == _path_id(plain)
    assert lessonledger.project_id(plain) != lessonledger.project_id(bare)


def test_the_installed_wheel_has_the_package_top(tmp_path: Path) -> None:
    files = {str(f) for f in importlib.metadata.files("lessonledger") or []}
    assert {"lessonledger/__init__.py", "lessonledger/py.typed"} <= files
    repo = _repo(tmp_path / "repo", ("origin", "git@github.com:acme/widgets.git"))
    # From a directory outside the checkout, so only the installed package can answer.
    script = "import lessonledger, sys; print(lessonledger.project_id(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", script, str(repo)], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == _git_id("github.com/acme/widgets")
