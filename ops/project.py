"""A project's digest: what every client records outcomes and asks for lessons under.

Paths are user data, so a project is known by a digest, computed the same way by every
client in any language:

1. The remote: ``git remote get-url origin`` in the directory (``url.*.insteadOf``
   applied, as git itself would); with no ``origin``, the first remote in name order.
2. The remote normalised (:func:`normalised_remote`): the scheme, the user and password
   and the port are dropped, the host is lowercased, percent-escapes in the path are
   decoded, and slashes and one ``.git`` at either end of the path are stripped; the path
   keeps its case. So ``git@GitHub.com:acme/widgets.git``,
   ``https://alice@github.com/acme/widgets`` and ``ssh://git@github.com:22/acme/widgets.git/``
   are all ``github.com/acme/widgets``. A remote that is a local path (``/srv/widgets.git``,
   ``file:///srv/widgets.git``, ``../widgets``) is its real absolute path without ``.git``,
   with relative paths taken from the work tree's top.
3. The digest: the first 32 hex characters of ``sha256("git:" + normalised)`` in UTF-8.

A directory with no remote (or not in a git work tree, or without git installed) is known
by its path instead: ``sha256("path:" + real path of the work tree's top)``, or of the
directory itself outside a work tree, cut to 32 hex characters likewise. The prefixes keep
a path from ever meaning the same as a remote.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from urllib.parse import unquote, urlsplit

__all__ = ["DIGEST_CHARS", "normalised_remote", "path_id", "project_id", "remote_id"]

#: Hex characters of a project digest (128 bits: no two projects will share one).
DIGEST_CHARS = 32
#: ``scheme://``, as git recognises a URL.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: git's scp-like syntax: ``[user@]host:path``, a colon before any slash.
_SCP = re.compile(r"^(?:[^@/:]*@)?(?P<host>[^/:]+):(?P<path>.*)\Z", re.DOTALL)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def _tidy(path: str) -> str:
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    return path.strip("/")


def normalised_remote(url: str, top: str | os.PathLike[str] = ".") -> str:
    """A remote URL as the digest reads it: ``host/path``, or a local path's real path.

    Args:
        url: the remote's URL as git gives it.
        top: the work tree's top, that a relative local path is taken from.
    """
    url = url.strip()
    if _URL.match(url):
        parts = urlsplit(url)
        if parts.scheme.lower() != "file" and parts.hostname:
            return f"{parts.hostname.lower()}/{_tidy(unquote(parts.path))}"
        return _local(unquote(parts.path), top)
    scp = _SCP.match(url)
    # A one-letter "host" is a Windows drive (C:\repo), which git takes as a path too.
    if scp and len(scp["host"]) > 1:
        return f"{scp['host'].lower()}/{_tidy(scp['path'])}"
    return _local(url, top)


def _local(path: str, top: str | os.PathLike[str]) -> str:
    real = os.path.realpath(os.path.join(os.fspath(top), path)).rstrip("/")
    return real[: -len(".git")] if real.endswith(".git") else real


def remote_id(url: str, top: str | os.PathLike[str] = ".") -> str:
    """The digest of a project whose remote is ``url`` (see the module docstring)."""
    return _digest("git:" + normalised_remote(url, top))


def path_id(path: str | os.PathLike[str]) -> str:
    """The digest of a project known only by its directory."""
    return _digest("path:" + os.path.realpath(os.fspath(path)))


def _git(path: str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-c", "safe.directory=*", "-C", path, *args],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None  # no git here: the path is all there is to go by
    return done.stdout.strip() if done.returncode == 0 else None


def project_id(path: str | os.PathLike[str] = ".") -> str:
    """The digest of the project that ``path`` is in, from its git remote or its path.

    Every client computes the same digest for the same remote: see the module docstring
    for the normalisation and the hash.
    """
    where = os.fspath(path)
    top = _git(where, "rev-parse", "--show-toplevel")
    if top is None:
        return path_id(where)
    remotes = sorted((_git(top, "remote") or "").split(), key=lambda n: (n != "origin", n))
    for name in remotes:
        url = _git(top, "remote", "get-url", name)
        if url:
            return remote_id(url, top)
    return path_id(top)
