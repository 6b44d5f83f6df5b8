"""CURVE key pairs on disk: ``NAME.key`` (public) and ``NAME.key_secret`` (secret).

The files are pyzmq's certificates (``zmq.auth.create_certificates``), read back with
``zmq.auth.load_certificate``. The public file is what a client gives the hub's admin
to be granted; the secret file never leaves the machine that made it, and is written
readable by its owner only (0600), through a private directory, so it is never readable
by others even for a moment. An existing pair is never overwritten.

The default key directory is ``$LESSONLEDGER_KEYS``, else :data:`DEFAULT_KEYS_DIR`
(``lessonledger.ops.config.keys_dir`` reads the environment: only ops does).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import msgspec
import zmq.auth
from lessonledger.ledger.errors import LessonLedgerError
from lessonledger.ledger.events import Z85_ALPHABET, KeyName
from zmq.utils import z85

__all__ = [
    "DEFAULT_KEYS_DIR",
    "KEYS_ENV",
    "KeyFileError",
    "load_public",
    "load_secret",
    "new_keys",
    "public_path",
]

#: Environment variable naming the key directory.
KEYS_ENV = "LESSONLEDGER_KEYS"
#: Where keys live when the environment names no directory.
DEFAULT_KEYS_DIR = "~/.lessonledger-keys"


class KeyFileError(LessonLedgerError):
    """A key file is missing, malformed, or not the kind asked for; nothing was done.

    Attributes:
        path: the file.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        super().__init__(f"key file {os.fspath(path)}: {problem}")
        self.path = Path(path)


def public_path(directory: str | os.PathLike[str], name: str) -> Path:
    """Where ``new_keys(directory, name)`` puts the public key: ``<directory>/NAME.key``."""
    return Path(directory).expanduser() / f"{_name(name)}.key"


def new_keys(directory: str | os.PathLike[str], name: str) -> tuple[Path, Path]:
    """Write a new CURVE key pair as ``NAME.key`` and ``NAME.key_secret`` in ``directory``.

    Returns:
        The public file's path and the secret file's.

    Raises:
        KeyFileError: the name is not a key name, or a file of that name exists.
    """
    name = _name(name)
    home = Path(directory).expanduser()
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    public, secret = home / f"{name}.key", home / f"{name}.key_secret"
    for path in (public, secret):
        if path.exists():
            raise KeyFileError(path, "exists already; keys are never overwritten: pick "
                               "another name, or delete the old pair first")
    with tempfile.TemporaryDirectory(dir=home, prefix=".new-") as private:  # mode 0700
        made = [Path(p) for p in zmq.auth.create_certificates(private, name)]
        for path in made:
            path.chmod(0o600 if path.suffix == ".key_secret" else 0o644)
        try:
            # A link, not a rename: it fails rather than replace a pair made meanwhile.
            for made_path, final in zip(made, (public, secret), strict=True):
                os.link(made_path, final)
        except FileExistsError as e:
            raise KeyFileError(e.filename or public, "appeared while the pair was made; "
                               "nothing was overwritten") from None
    return public, secret


def load_public(path: str | os.PathLike[str], *, public_only: bool = False) -> bytes:
    """The Z85 public key in a key file.

    Args:
        path: a ``NAME.key`` file (or a secret file, which holds the public key too).
        public_only: refuse a file that holds a secret key: what an admin is given to
            grant must be the public file.

    Raises:
        KeyFileError: missing, malformed, or (``public_only``) a secret file.
    """
    public, secret = _load(path)
    if public_only and secret is not None:
        raise KeyFileError(path, "holds a secret key; give the public file (NAME.key): "
                           "the secret file never leaves the machine that made it")
    return public


def load_secret(path: str | os.PathLike[str]) -> tuple[bytes, bytes]:
    """The Z85 public and secret keys in a secret key file (``NAME.key_secret``).

    Raises:
        KeyFileError: missing, malformed, or holding no secret key.
    """
    public, secret = _load(path)
    if secret is None:
        raise KeyFileError(path, "holds no secret key; give the NAME.key_secret file "
                           "`lessonledger keys new NAME` wrote")
    return public, secret


def _load(path: str | os.PathLike[str]) -> tuple[bytes, bytes | None]:
    if not Path(path).is_file():
        raise KeyFileError(path, "not found; make a pair with `lessonledger keys new NAME`")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise KeyFileError(path, f"is not a key file ({e}); make a pair with "
                           "`lessonledger keys new NAME`") from None
    for kind, key in (("public", public), ("secret", secret)):
        if key is not None and not _is_key(key):
            raise KeyFileError(path, f"its {kind} key is not 40 Z85 characters; the file "
                               "is damaged: make a new pair")
    return public, secret


_Z85 = frozenset(Z85_ALPHABET)


def _is_key(key: bytes) -> bool:
    try:
        return (len(key) == 40 and set(key.decode("ascii")) <= _Z85
                and len(z85.decode(key)) == 32)
    except (ValueError, KeyError, IndexError, UnicodeDecodeError):
        return False


def _name(name: str) -> str:
    try:
        return msgspec.convert(name, KeyName)
    except msgspec.ValidationError:
        msg = (f"{name!r} is not a key name: letters, digits, '_', '.' and '-', not "
               "starting with '.' or '-', at most 100 characters")
        raise KeyFileError(name, msg) from None
