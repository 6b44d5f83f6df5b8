"""Shared tools of the attack14 tests: the CLI in a process, raw logs, a tampering relay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import zmq
from lessonledger.ledger.lmdb_env import acquire, release
from lessonledger.ledger.log import LOG_NAME, EventLog
from lessonledger.sync import wire
from lessonledger.sync.protocol import Chunk, SyncReplyFrame, decode_reply, encode

CLI = [sys.executable, "-m", "lessonledger.ops"]
ENV = {**os.environ, "LESSONLEDGER_SYNC": "os"}


def run(*args: str, check: bool = True, env: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env or ENV,
                          timeout=300, input=stdin)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def lines(*args: str, env: dict[str, str] | None = None) -> list[Any]:
    return [json.loads(line) for line in run(*args, env=env).stdout.splitlines()]


def raw(home: Path) -> list[tuple[int, bytes, bytes | None, bytes | None]]:
    lmdb_home = acquire(str(home), sync=False)
    try:
        return list(EventLog(lmdb_home, LOG_NAME).raw())
    finally:
        release(lmdb_home)


class TamperingRelay:
    """A ROUTER/DEALER relay between a replica and a hub that may alter sync chunks.

    ``damage(chunk)`` returns the chunk to pass on (or the same one); it sees every chunk.
    ``drop(reply)`` True: that sync reply is not passed on (the connection lost it).
    """

    def __init__(self, hub_url: str, damage: Callable[[Chunk], Chunk] = lambda c: c,
                 drop: Callable[[Any], bool] = lambda reply: False) -> None:
        self.context = zmq.Context()
        self.front = self.context.socket(zmq.ROUTER)
        port = self.front.bind_to_random_port("tcp://127.0.0.1")
        self.url = f"tcp://127.0.0.1:{port}"
        self.back = self.context.socket(zmq.DEALER)
        self.back.connect(hub_url)
        self.damage = damage
        self.drop = drop
        self.dropped = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._relay, daemon=True)
        self.thread.start()

    def _relay(self) -> None:
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.back, zmq.POLLIN)
        peer = b""
        while not self.stopping.is_set():
            ready = dict(poller.poll(100))
            if self.front in ready:
                peer, frame = self.front.recv_multipart()
                self.back.send(frame)
            if self.back in ready:
                frame = self.back.recv()
                outer = wire.decode_frame(frame, limit=len(frame))
                carried: msgspec.Struct = wire.decode_body(outer)
                if isinstance(carried, SyncReplyFrame):
                    reply = decode_reply(carried.frame)
                    if self.drop(reply):
                        self.dropped += 1
                        continue
                    if isinstance(reply, Chunk):
                        damaged = self.damage(reply)
                        if damaged is not reply:
                            frame = wire.encode_frame(SyncReplyFrame(encode(damaged)),
                                                      outer.id)
                self.front.send_multipart([peer, frame])

    def close(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.front.close(0)
        self.back.close(0)
        self.context.term()
