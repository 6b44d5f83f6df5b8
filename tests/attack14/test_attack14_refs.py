"""Refs and snapshots (attack14): what a name or an id given to ``checkout`` names."""

from __future__ import annotations

import json
from pathlib import Path

import _attack14_paths  # noqa: F401
from _attack14_tools import lines, run

P = "3f9a0c1b2d4e5f60"


def _publish(home: Path, *keys: str) -> None:
    text = "".join(json.dumps({"command": "observe_outcome", "key": k, "project": P,
                               "passed": True, "task": f"task {k}"}) + "\n" for k in keys)
    run("--home", str(home), "publish", "-", stdin=text)


def test_a_full_snapshot_id_checks_out_that_snapshot_even_when_a_ref_bears_it(
        tmp_path: Path) -> None:
    """FAILED on cc978dc: a ref could be named with another snapshot's full hex id (any
    printable name was taken), and ``checkout ID`` then looked the ref up first: it
    materialised the later snapshot the ref names, not the one the content address
    names. Breaks DESIGN §7 "objects, content-addressed by SHA-256" (an id names exactly
    one snapshot). Now a name of hex digits alone is refused (exit 2, one line, nothing
    written), and a full id is looked up before any ref name."""
    home = tmp_path / "home"
    run("--home", str(home), "init")
    _publish(home, "a1", "a2")
    first = lines("--home", str(home), "snapshot", "--name", "main", "--json")[0]
    _publish(home, "b1", "b2", "b3")
    for name in (first["id"], first["id"][:12].upper(), "0"):
        refused = run("--home", str(home), "snapshot", "--name", name, check=False)
        assert refused.returncode == 2, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    listed = lines("--home", str(home), "snapshots", "--json")
    assert [snap["id"] for snap in listed] == [first["id"]], listed
    later = lines("--home", str(home), "snapshot", "--name", "main", "--json")[0]
    assert later["last"] > first["last"]
    out = lines("--home", str(home), "checkout", first["id"], "--into",
                str(tmp_path / "c"), "--json")[0]
    assert (out["snapshot"], out["last"]) == (first["id"], first["last"])


def test_guard_checkout_refuses_the_home_itself_a_directory_inside_it_and_a_full_one(
        tmp_path: Path) -> None:
    """GUARD: ``checkout --into`` the home, a directory inside it, a symlink into it, or a
    directory that is not empty is refused with exit 2, and writes nothing there."""
    home = tmp_path / "home"
    run("--home", str(home), "init")
    _publish(home, "a1")
    run("--home", str(home), "snapshot", "--json")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine\n")
    link = tmp_path / "link"
    link.symlink_to(home / "sub", target_is_directory=True)
    before = sorted(p.name for p in home.iterdir())
    for into in (home, home / "sub", link, full):
        done = run("--home", str(home), "checkout", "main", "--into", str(into), check=False)
        assert done.returncode == 2, (into, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
    assert sorted(p.name for p in home.iterdir()) == before
    assert [p.name for p in full.iterdir()] == ["keep.txt"]


def test_guard_snapshots_taken_at_once_by_four_processes_form_one_chain(
        tmp_path: Path) -> None:
    """GUARD: four ``snapshot --name main`` processes started together each report a
    snapshot, all four are listed, and their parents form one chain (compare-and-swap:
    no two share a parent)."""
    import subprocess

    from _attack14_tools import CLI, ENV

    home = tmp_path / "home"
    run("--home", str(home), "init")
    _publish(home, "a1")
    procs = [subprocess.Popen([*CLI, "--home", str(home), "snapshot", "--name", "main",
                               "--origin", f"p{i}", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=ENV) for i in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    reported = {json.loads(out)["id"] for out, _ in outs}
    listed = lines("--home", str(home), "snapshots", "--json")
    assert {s["id"] for s in listed} == reported
    chain = sorted(listed, key=lambda s: s["last"])
    assert chain[0]["parent"] is None
    assert [s["parent"] for s in chain[1:]] == [s["id"] for s in chain[:-1]]
