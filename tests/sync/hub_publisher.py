"""A publisher process: sends its plan's outcomes through a hub, writes each receipt.

    python hub_publisher.py ENDPOINT AGENT COUNT OUT GO [TIMEOUT]

Waits for the file GO to exist, then sends ``COUNT`` outcomes one at a time, appending
``key positions`` to OUT as each is acknowledged (so a test that kills the hub knows
what was acknowledged before).
"""

from __future__ import annotations

import os
import sys
import time

import msgspec
from hubtools import outcome
from lessonledger.sync import RemoteLedger


def main(endpoint: str, agent: int, count: int, out: str, go: str, timeout: float) -> None:
    with RemoteLedger(endpoint, timeout=timeout, deadline=300.0) as ledger, \
            open(out, "ab", buffering=0) as acks:
        ledger.head()  # connected before the start
        deadline = time.monotonic() + 120
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                sys.exit("the start signal never came")
            time.sleep(0.005)
        for i in range(count):
            command = outcome(agent, i)
            receipt = ledger.execute(command)
            acks.write(msgspec.json.encode([command.key, receipt.positions]) + b"\n")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5],
         float(sys.argv[6]) if len(sys.argv) > 6 else 30.0)
