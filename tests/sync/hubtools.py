"""A hub in a real process on 127.0.0.1, and the publisher plans the hub tests share.

:func:`curve_hub` is the hub with CURVE keys the access and attack tests start: key pairs
made, grants written on the home before it serves (as an operator would with
``lessonledger access grant``), and the process killed at the end.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lessonledger.commands import Ledger, Operation
from lessonledger.commands.access import GrantAccess
from lessonledger.commands.messages import ObserveOutcome, command_from
from lessonledger.sync import RemoteLedger
from lessonledger.sync.client import HubUnavailableError
from lessonledger.sync.keys import load_public, new_keys

PROJECTS = ("a" * 32, "b" * 32)
#: target → (the form that fails, the form that works, the failure's signature)
FORMS = {
    "tests": ("pytest:tests/", "pytest:root", "no conftest"),
    "build": ("make", "ninja", "no Makefile"),
    "docs": ("sphinx:old", "sphinx:new", "unknown directive"),
}
TARGETS = tuple(FORMS)


def lessonledger() -> str:
    return str(Path(sys.executable).with_name("lessonledger"))


def run_ok(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the CLI (``python -m lessonledger.ops``) with ``env``; assert it succeeded."""
    done = subprocess.run([sys.executable, "-m", "lessonledger.ops", *args],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done


def free_ports(n: int = 2) -> list[int]:
    """Ports free on 127.0.0.1 now (held open together so they differ)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def outcome(agent: int, i: int) -> ObserveOutcome:
    """Publisher ``agent``'s ``i``-th command: every lesson on a target agrees with all.

    Most outcomes show the failing form then the working one (the loop's signal); every
    fourth runs only the working form (a confirmation of whatever is in play).
    """
    project = PROJECTS[(agent + i) % 2]
    target = TARGETS[(agent * 7 + i) % 3]
    failing, working, error = FORMS[target]
    ops = [Operation(op=working, target=target, ok=True)] if i % 4 == 3 else [
        Operation(op=failing, target=target, ok=False, error=error),
        Operation(op=working, target=target, ok=True, order=1)]
    return command_from({"key": f"pub{agent}-{i}", "project": project,
                         "session": f"pub{agent}-s{i // 10}", "passed": True,
                         "operations": ops}, ObserveOutcome)


class HubProcess:
    """``lessonledger serve`` on a home, in its own process."""

    def __init__(self, home: Path, log: Path, *extra: str) -> None:
        self.home = home
        self.log = log
        self.port, self.pub_port = free_ports(2)
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait: float = 60.0, client: RemoteLedger | None = None) -> None:
        if not (self.home / "data.mdb").exists():
            from lessonledger.ops.cli import main  # not at the top: publishers import this file

            # In this process: making the home is not what the hub tests are about, and a
            # process of its own cost a second. It is closed again before the hub opens it.
            with contextlib.redirect_stdout(io.StringIO()):
                assert main(["--home", str(self.home), "init"]) == 0
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [lessonledger(), "--home", str(self.home), "serve", "--bind", self.endpoint,
                 "--pub", f"tcp://127.0.0.1:{self.pub_port}", *self.extra],
                stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + wait
        try:
            with client or RemoteLedger(self.endpoint, timeout=1.0, deadline=wait) as probe:
                while True:
                    assert self.proc.poll() is None, self.log.read_text()
                    try:
                        probe.status()
                        return
                    except HubUnavailableError:
                        assert time.monotonic() < deadline, self.log.read_text()
        except BaseException:
            self.kill()  # a hub that never answered is not left running
            raise

    def terminate(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@contextmanager
def hub(home: Path, log: Path, *extra: str, drain: bool = False) -> Iterator[HubProcess]:
    """A hub serving ``home`` for the block; killed at the end.

    With ``drain``, a block that ends well ends with SIGTERM instead, and the hub must
    drain and exit 0 (a failing block still kills it, and its own error is reported).
    """
    process = HubProcess(home, log, *extra)
    process.start()
    try:
        yield process
        if drain and process.proc is not None and process.proc.poll() is None:
            assert process.terminate(timeout=60) == 0, log.read_text()
    finally:
        process.kill()


class Keys:
    """Key pairs in one directory, as ``lessonledger keys new`` writes them."""

    def __init__(self, directory: Path, names: tuple[str, ...] = ()) -> None:
        self.dir = directory
        for name in ("hub", *names):
            if not self.public(name).exists():
                new_keys(directory, name)

    def secret(self, name: str) -> Path:
        return self.dir / f"{name}.key_secret"

    def public(self, name: str) -> Path:
        return self.dir / f"{name}.key"

    def client(self, server: HubProcess, name: str, **options: Any) -> RemoteLedger:
        return RemoteLedger(server.endpoint, key=self.secret(name),
                            server_key=self.public("hub"), **options)

    def grant(self, ledger: Ledger, name: str, principal: str, **fields: Any) -> None:
        """Grant ``name``'s key to ``principal`` (``read=``, ``write=``, ``admin=``)."""
        ledger.execute(GrantAccess(key=f"grant-{name}", key_name=name,
                                   public_key=load_public(self.public(name)).decode(),
                                   principal=principal, **fields))


@contextmanager
def curve_hub(base: Path, grants: Mapping[str, tuple[str, dict[str, Any]]], *,
              admin: str, keys: tuple[str, ...] = (),
              prepare: Callable[[Ledger], object] | None = None,
              extra: tuple[str, ...] = ()) -> Iterator[tuple[HubProcess, Keys]]:
    """A hub serving ``base / "home"`` with CURVE, its grants written before it starts.

    Args:
        base: a directory of its own (``keys``, ``home`` and ``hub.log`` go in it).
        grants: key name -> (principal, the grant's fields).
        admin: the granted key that probes the hub until it answers.
        keys: more key pairs to make, granted nothing (strangers, later grants).
        prepare: writes on the home before the grants (a workload).
        extra: more ``serve`` options.
    """
    made = Keys(base / "keys", (*grants, *keys))
    with Ledger(base / "home") as ledger:
        if prepare is not None:
            prepare(ledger)
        for name, (principal, fields) in grants.items():
            made.grant(ledger, name, principal, **fields)
    server = HubProcess(base / "home", base / "hub.log", "--key", str(made.secret("hub")),
                        *extra)
    try:
        server.start(client=made.client(server, admin, timeout=1.0, deadline=60.0))
        yield server, made
    finally:
        server.kill()
