"""A msgspec transcoder for eventsourcing applications that want msgpack instead of JSON.

msgspec writes UUID, Decimal and datetime as strings, which an untyped decode cannot
tell from strings; so those are wrapped in msgpack extension types and restored on
decode. Tuples come back as lists, as with eventsourcing's JSON transcoder.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import Transcoder

__all__ = ["MsgspecTranscoder"]

_UUID, _DECIMAL, _DATETIME, _DATE = 1, 2, 3, 4


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, UUID):
        return msgspec.msgpack.Ext(_UUID, obj.bytes)
    if isinstance(obj, Decimal):
        return msgspec.msgpack.Ext(_DECIMAL, str(obj).encode())
    if isinstance(obj, datetime):
        return msgspec.msgpack.Ext(_DATETIME, obj.isoformat().encode())
    if isinstance(obj, date):
        return msgspec.msgpack.Ext(_DATE, obj.isoformat().encode())
    msg = f"cannot transcode {type(obj).__name__!r}; use UUID, Decimal, datetime or plain data"
    raise TypeError(msg)


def _ext_hook(code: int, data: memoryview) -> Any:
    raw = bytes(data)
    if code == _UUID:
        return UUID(bytes=raw)
    if code == _DECIMAL:
        return Decimal(raw.decode())
    if code == _DATETIME:
        return datetime.fromisoformat(raw.decode())
    if code == _DATE:
        return date.fromisoformat(raw.decode())
    msg = f"unknown msgpack extension code {code}"
    raise ValueError(msg)


def _wrap(obj: Any) -> Any:
    # msgspec encodes these natively as strings before any hook sees them, so wrap first.
    if isinstance(obj, dict):
        return {k: _wrap(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_wrap(v) for v in obj]
    if isinstance(obj, UUID | Decimal | date):
        return _enc_hook(obj)
    return obj


class MsgspecTranscoder(Transcoder):
    """Select with ``TRANSCODER_TOPIC=lessonledger.ledger.transcoder:MsgspecTranscoder``."""

    def __init__(self) -> None:
        self._encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
        self._decoder = msgspec.msgpack.Decoder(ext_hook=_ext_hook)

    def encode(self, obj: Any) -> bytes:
        """Encode plain data, UUIDs, Decimals and datetimes to msgpack."""
        return self._encoder.encode(_wrap(obj))

    def decode(self, data: bytes) -> Any:
        """Decode msgpack written by :meth:`encode`."""
        return self._decoder.decode(data)
