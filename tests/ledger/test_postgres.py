"""The same eventsourcing application on our LMDB module and on eventsourcing's PostgreSQL.

A throwaway PostgreSQL server is started for the module (initdb into a temp dir, on a
free loopback port, as the ``postgres`` user when the tests run as root) and stopped after.
The application is eventsourcing's own example, ``BankAccounts``; both runs must answer
alike and record the same events in the same order, snapshots included.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.tests.application import BankAccounts

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL extra is not installed")


def _as_owner(argv: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its programs as ``postgres`` then."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    if shutil.which("initdb") is None or shutil.which("pg_ctl") is None:
        pytest.skip("PostgreSQL's initdb and pg_ctl are not on PATH")
    top = Path(tempfile.mkdtemp(prefix="lessonledger-pg-"))
    if os.geteuid() == 0:
        shutil.chown(top, "postgres")
    data, port = top / "data", _free_port()
    subprocess.run(_as_owner(["initdb", "-D", str(data), "-A", "trust", "-U", "postgres"]),
                   check=True, capture_output=True)
    options = f"-p {port} -k {top} -c listen_addresses=127.0.0.1"
    subprocess.run(_as_owner(["pg_ctl", "-D", str(data), "-o", options, "-l",
                              str(top / "log"), "-w", "start"]), check=True, capture_output=True)
    try:
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE ledger")
        yield {"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_DBNAME": "ledger",
               "POSTGRES_HOST": "127.0.0.1", "POSTGRES_PORT": str(port),
               "POSTGRES_USER": "postgres", "POSTGRES_PASSWORD": "unused-trust-auth"}
    finally:
        subprocess.run(_as_owner(["pg_ctl", "-D", str(data), "-m", "fast", "stop"]),
                       capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def _story(env: dict[str, str]) -> dict[str, Any]:
    """Open accounts, move money, snapshot; return what the application answers and holds."""
    app = BankAccounts(env={"IS_SNAPSHOTTING_ENABLED": "y", **env})
    try:
        alice = app.open_account(full_name="Alice", email_address="alice@example.com")
        bob = app.open_account(full_name="Bob", email_address="bob@example.com")
        for amount in ("10.00", "25.00", "30.00"):
            app.credit_account(alice, Decimal(amount))
        app.credit_account(bob, Decimal("5.00"))
        app.take_snapshot(alice)
        notifications = app.notification_log.select(start=1, limit=10)
        snapshots = list(app.snapshots.get(alice)) if app.snapshots else []
        ids: dict[object, str] = {alice: "alice", bob: "bob"}
        return {
            "factory": type(app.factory).__module__,
            "balances": (app.get_balance(alice), app.get_balance(bob)),
            "notifications": [(n.id, ids[n.originator_id], n.originator_version,
                               n.topic.rsplit(".", 1)[-1]) for n in notifications],
            "snapshots": [(s.originator_version, getattr(s, "state", {}).get("balance"))
                          for s in snapshots],
            "replayed": app.repository.get(alice, version=3).balance,
        }
    finally:
        app.close()


def test_the_same_application_runs_on_lmdb_and_on_postgres(
        postgres: dict[str, str], tmp_path: Path) -> None:
    on_lmdb = _story({"PERSISTENCE_MODULE": "lessonledger.ledger", "LMDB_PATH": str(tmp_path)})
    on_postgres = _story(postgres)
    assert on_lmdb.pop("factory") == "lessonledger.ledger.lmdb_recorders"
    assert on_postgres.pop("factory") == "eventsourcing.postgres"
    assert on_lmdb == on_postgres
    assert on_lmdb["balances"] == (Decimal("65.00"), Decimal("5.00"))
    assert len(on_lmdb["notifications"]) == 6
    assert on_lmdb["snapshots"] == [(4, Decimal("65.00"))]
    assert on_lmdb["replayed"] == Decimal("35.00")
