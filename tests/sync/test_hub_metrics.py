"""``lessonledger serve --metrics``: a running hub scraped under load, against its log.

Real processes on 127.0.0.1: a hub with ``--metrics``, clients publishing, recalling
and sending refused commands from threads while the endpoint is scraped and parsed with
``prometheus_client.parser``. Every scrape's event counts add up to the head it reports;
afterwards the counts by type equal the log's own, the request and refusal counters
equal what the clients sent, and the batch histogram equals the hub's own status. A
replica cloned from the hub acknowledges an erasure, and the metric counts it.
"""

from __future__ import annotations

import collections
import json
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import hubtools
import msgspec
import pytest
from hubtools import PROJECTS, free_ports, lessonledger, outcome
from lessonledger.commands.errors import InvalidCommandError
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.sync import RemoteLedger
from prometheus_client.parser import text_string_to_metric_families

CLIENTS, COMMANDS, RECALLS, SPOOFS = 4, 40, 10, 3

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: value for (n, labels), value in samples.items()
            if n == name}


def log_types(home: Path) -> collections.Counter[str]:
    lmdb_home = acquire(str(home), sync=False)
    try:
        return collections.Counter(r.envelope.type for r in EventLog(lmdb_home, LOG_NAME).read())
    finally:
        release(lmdb_home)


def _client(endpoint: str, agent: int, errors: list[BaseException]) -> None:
    try:
        # A resend after a timeout leaves a reply to the old socket ``dropped``: under a
        # loaded machine's 10 s stalls that was counted beside the refusals the test sends.
        with RemoteLedger(endpoint, timeout=60.0, deadline=120.0) as ledger:
            for i in range(COMMANDS):
                ledger.execute(outcome(agent, i))
                if i % (COMMANDS // RECALLS) == 0:
                    ledger.recall(PROJECTS[i % 2], "target-1 failed", record=False)
            for i in range(SPOOFS):
                spoof = msgspec.structs.replace(outcome(agent, COMMANDS + i),
                                                principal="mallory")
                with pytest.raises(InvalidCommandError):
                    ledger.execute(spoof)
    except BaseException as e:
        errors.append(e)


def test_a_hub_scraped_under_load_counts_what_its_log_and_clients_did(tmp_path: Path
                                                                      ) -> None:
    home = tmp_path / "hub"
    (port,) = free_ports(1)
    url = f"http://127.0.0.1:{port}/metrics"
    with hubtools.hub(home, tmp_path / "serve.log", "--metrics", f"127.0.0.1:{port}",
                      drain=True) as hub:
        errors: list[BaseException] = []
        threads = [threading.Thread(target=_client, args=(hub.endpoint, a, errors))
                   for a in range(CLIENTS)]
        for t in threads:
            t.start()
        scrapes = 0
        while any(t.is_alive() for t in threads):
            samples = scrape(url)
            scrapes += 1
            # One scrape, one head: the events counted by type add up to it.
            events = by_label(samples, "lessonledger_events_appended_total", "type")
            assert sum(events.values()) == samples[("lessonledger_log_head", ())]
            time.sleep(0.05)
        for t in threads:
            t.join()
        assert not errors, errors
        assert scrapes >= 2

        with RemoteLedger(hub.endpoint) as ledger:
            status = ledger.status()
        samples = scrape(url)
        events = by_label(samples, "lessonledger_events_appended_total", "type")
        assert events == dict(log_types(home))
        assert samples[("lessonledger_log_head", ())] == sum(log_types(home).values())
        requests = by_label(samples, "lessonledger_commands_total", "kind")
        assert requests["command"] == CLIENTS * (COMMANDS + SPOOFS)
        assert requests["query:recall"] == CLIENTS * RECALLS
        refusals = by_label(samples, "lessonledger_refusals_total", "error")
        assert refusals == {"InvalidCommandError": CLIENTS * SPOOFS}
        assert samples[("lessonledger_commit_batch_size_count", ())] == status.batches
        assert samples[("lessonledger_commit_batch_size_sum", ())] == status.commands
        assert samples[("lessonledger_commit_seconds_count", ())] == status.batches
        assert samples[("lessonledger_recall_seconds_count", ())] == CLIENTS * RECALLS

        # An erasure, applied and acknowledged by a replica cloned from the same hub.
        replica = tmp_path / "r1"
        cli = [lessonledger()]
        subprocess.run([*cli, "clone", hub.endpoint, str(replica), "--name", "r1"],
                       check=True, capture_output=True, timeout=120)
        erased = subprocess.run([*cli, "--home", str(home), "erase", "--session",
                                 "pub0-s0", "--reason", "asked", "--json"],
                                capture_output=True, text=True, timeout=120)
        assert erased.returncode in (0, 3), erased.stderr  # 3: the hub has it open
        subprocess.run([*cli, "--home", str(replica), "pull"], check=True,
                       capture_output=True, timeout=120)
        listed = subprocess.run([*cli, "--home", str(home), "erasures", "--json"],
                                check=True, capture_output=True, text=True).stdout
        rows = [json.loads(line) for line in listed.splitlines()]
        samples = scrape(url)
        acks = by_label(samples, "lessonledger_erasure_acknowledgements", "erasure")
        assert acks == {str(row["position"]): len(row["acked_by"]) for row in rows}
        assert list(acks.values()) == [1]
        assert sum(by_label(samples, "lessonledger_erasures_total", "what").values()) == 1
        requests = by_label(samples, "lessonledger_commands_total", "kind")
        assert requests["sync"] >= 3  # hello, fetches, the acknowledgement
