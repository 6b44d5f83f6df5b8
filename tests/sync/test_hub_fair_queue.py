"""A key flooding the hub from many connections holds one client's share of its queue.

The hub runs with a small queue (``--queue 64``: a share of 4 each) so that a flood fills
it at once. Without shares, the flood held the whole queue and the other key was told
``busy`` while it lasted; with them, every one of the other key's commands is taken.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import zmq
from hubtools import HubProcess, Keys, curve_hub, outcome
from lessonledger.sync import wire
from lessonledger.sync.keys import load_public, load_secret

P = "d" * 32
CONNECTIONS = 16


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HubProcess, Keys]]:
    grants = {"flood": ("flood", {"write": [P]}), "good": ("good", {"write": [P]})}
    with curve_hub(tmp_path_factory.mktemp("fair"), grants, admin="good",
                   extra=("--queue", "64")) as started:
        yield started


def _dealer(ctx: zmq.Context[Any], server: HubProcess, keys: Keys, name: str
            ) -> zmq.Socket[Any]:
    sock: zmq.Socket[Any] = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_publickey, sock.curve_secretkey = load_secret(keys.secret(name))
    sock.curve_serverkey = load_public(keys.public("hub"))
    sock.connect(server.endpoint)
    return sock


def _command(agent: int, i: int) -> bytes:
    command = msgspec.structs.replace(outcome(agent, i), project=P)
    return wire.encode_frame(wire.CommandRequest(msgspec.Raw(msgspec.msgpack.encode(
        command))), i + 1)


def test_a_flood_from_many_connections_leaves_another_key_its_share(
        setup: tuple[HubProcess, Keys]) -> None:
    server, keys = setup
    ctx: zmq.Context[Any] = zmq.Context()
    stop = threading.Event()
    flooded: list[str] = []

    def flood() -> None:
        socks = [_dealer(ctx, server, keys, "flood") for _ in range(CONNECTIONS)]
        try:
            sent = 0
            while not stop.is_set():
                for n, sock in enumerate(socks):
                    for _ in range(8):
                        with contextlib.suppress(zmq.Again):
                            sock.send(_command(100 + n, sent), zmq.NOBLOCK)
                        sent += 1
                    while sock.poll(0):
                        flooded.append(type(wire.decode_body(
                            wire.decode_frame(sock.recv()))).__name__)
        finally:
            for sock in socks:
                sock.close(0)

    flooder = threading.Thread(target=flood)
    flooder.start()
    good = _dealer(ctx, server, keys, "good")
    try:
        answers = []
        for i in range(20):
            while flooded.count("Busy") < 10 * (i + 1):  # the flood is at full strength
                assert flooder.is_alive()
                threading.Event().wait(0.005)
            good.send(_command(1, i))
            assert good.poll(30_000), "the good key got no answer"
            answers.append(type(wire.decode_body(wire.decode_frame(good.recv()))).__name__)
        assert answers == ["Receipted"] * 20, answers
    finally:
        stop.set()
        flooder.join(timeout=60)
        good.close(0)
        ctx.term()
    assert "Receipted" in flooded, "the flooding key is served too, within its share"
