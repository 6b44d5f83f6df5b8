"""Text shaped like a credential, found by detect-secrets' plugins and a few patterns of ours.

Whatever enters the ledger stays: an envelope's actor, principal and session, and an
``Erased`` record's reason and author, are kept forever, and erasure removes bodies only.
So every string a writer chooses is scanned before anything is written, by the write
paths above this module (:mod:`lessonledger.ledger.submission`, the command handlers,
recall records, erasure).

The detector is Yelp's ``detect-secrets``: its vendor plugins (AWS, GitHub, GitLab,
Slack, Stripe, npm, private keys, basic-auth URLs, JWTs, …) and its keyword detector's
config-file regexes (``DB_PASSWORD=x``, ``api_key: x``, ``secret = "x"``), called
in-process on one string at a time. Its global settings are never used, so a candidate
is never verified over the network and ``pragma: allowlist secret`` in the text allows
nothing. Left out, because they refuse ordinary content: the two high-entropy plugins
(hex digests, base64 hashes and ids in error output are all high-entropy, and project ids
are hex) and the public-IP plugin (an address in an error message is no secret).

A keyword hit is dropped by detect-secrets' own heuristics (a template ``${X}`` or
``<x>``, a ``$VARIABLE``, an indirect reference ``password = vault.get("db")``, a
sequence, a UUID, a value with no letter), judged per assignment rather than per line,
so that one harmless assignment does not hide a real one after it. Word runs longer than
64 characters are cut to their last 64, and whitespace runs to 64, before the keyword
regexes see them: those regexes backtrack quadratically over a long run, and no variable
name (or the space around its ``=``) is that long. A line over 512 characters is read in
overlapping windows (:func:`_windows`), so a keyword's value is judged on at most its
first 256 to 512 characters.

Two plugin regexes backtrack quadratically too (npm's ``//.+/:_authToken=`` over a line of
``/``, OpenAI's ``sk-[…]*[…]{20}T3BlbkFJ`` over a run of ``sk-``): 100,000 ``/`` took 45 s.
Each is replaced by a linear function that answers exactly as the regex does
(:data:`_LINEAR`; a property test compares them). With that, no string of the longest a
field may hold (8192 characters) takes over about 10 ms, whatever its shape
(``tests/ledger/test_secret_cost.py``).

A CURVE key (40 Z85 characters) is refused bare (:func:`_z85_key`) and as its key file
writes it (``secret-key = "…"``): a secret key and a public key look alike, so a field
that holds a public key by its meaning (an access grant's ``public_key``) is left out of
the screen by the command that declares it, and checked as a key instead.

:data:`_OURS` covers shapes the plugins miss; each line says which. Add one only with a
test of the shape it catches.

Cost: a plugin reads a text only if one of its patterns matches it, and the keyword
regexes only text holding a keyword and an assignment sign. Both screens are necessary
conditions, so they change no answer. Short texts (labels, keys) are cached, since they
repeat from command to command.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from datetime import datetime
from functools import cache, lru_cache
from typing import TYPE_CHECKING, cast
from uuid import UUID

import msgspec
from lessonledger.ledger.text import folded

if TYPE_CHECKING:
    from detect_secrets.plugins.base import BasePlugin

__all__ = ["credential_field", "credential_in", "joined_operation", "text_fields", "warm_up"]

_OURS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rx, flags)) for name, rx, flags in (
        # GitHubTokenDetector knows only the classic gh?_ tokens.
        ("GitHub Token", r"github_pat_[A-Za-z0-9_]{22,}", 0),
        # NpmDetector needs the .npmrc line (//registry/:_authToken=…), not a bare token.
        ("NPM tokens", r"npm_[A-Za-z0-9]{36}\b", 0),
        # BasicAuthDetector needs a user name before the colon.
        ("Basic Auth Credentials", r"://:[^\s/?#@]+@", 0),
        # No plugin reads HTTP authorization headers.
        ("Authorization header",
         r"\bauthorization\s*[:=]\s*['\"]?(?:basic|bearer|token|digest)\s+[A-Za-z0-9+/._~=-]{8,}",
         re.IGNORECASE),
        ("Bearer token", r"bearer\s+[A-Za-z0-9._~+/-]{20,}", re.IGNORECASE),
        # PrivateKeyDetector lists key types; PKCS#8 "ENCRYPTED PRIVATE KEY" is not one.
        ("Private Key", r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----", 0),
        # OpenAIDetector knows only keys with the legacy T3BlbkFJ marker.
        ("API secret key", r"\bsk-[A-Za-z0-9_-]{20,}", 0),
        ("Google API key", r"AIza[0-9A-Za-z_-]{35}\b", 0),
        # A CURVE secret key as its key file writes it (``secret-key = "…"``).
        ("CURVE secret key",
         r"secret[-_ ]?key\s*[=:]\s*[\"']?[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}",
         re.IGNORECASE),
        # KeywordDetector has no "token" or "auth" keyword (GITHUB_TOKEN=…, auth: …).
        ("Secret Keyword", r"(?:token|auth|access_?key)\s*[=:]\s*['\"]?[A-Za-z0-9/+_.-]{8,}",
         re.IGNORECASE),
        # KeywordDetector reads api_key and apikey, not api-key (X-Api-Key: …, "api-key":).
        ("Secret Keyword", r"\bapi-key['\"]?\s*[=:]\s*['\"]?[A-Za-z0-9/+_.-]{8,}",
         re.IGNORECASE),
        # KeywordDetector needs an assignment sign; a command line gives a flag's value
        # after a space (mysql --password hunter2). A value that is a variable, a
        # template or stars ($PW, "$(cat f)", <pw>, ***) is no secret.
        ("Secret Keyword",
         r"(?:^|\s)--(?:password|passwd|api[-_]?key|token|auth-token|access-token|"
         r"client-secret)\s+['\"]?+(?![$<{*%])[^\s'\"]{6,}", re.IGNORECASE),
        # A netrc line (machine HOST login USER password PASSWORD): no assignment sign.
        ("Secret Keyword", r"\b(?:machine\s+\S+|default)\s+login\s+\S+\s+password\s+"
         r"['\"]?+(?![$<{*%])[^\s'\"]{4,}", re.IGNORECASE),
        # KeywordDetector's denylist has no passphrase.
        ("Secret Keyword", r"passphrase['\"]?\s*[=:]\s*['\"]?+(?![$<{*%])[^\s'\"]{6,}",
         re.IGNORECASE),
        ("Hugging Face token", r"\bhf_[A-Za-z0-9]{34,}\b", 0),
        # Vendor-prefixed tokens no plugin knows (SlackDetector: xox? only).
        ("Slack Token", r"\bxapp-[0-9]-[A-Za-z0-9-]{20,}", 0),
        ("Vault token", r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}", 0),
        ("DigitalOcean token", r"\bdo[opr]_v1_[a-f0-9]{64}\b", 0),
        ("Shopify token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", 0),
        ("Databricks token", r"\bdapi[a-f0-9]{32}(?:-[0-9])?\b", 0),
        ("Grafana token", r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b|\bglc_[A-Za-z0-9+/]{32,}", 0),
        ("Postman API key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b", 0),
        ("Linear API key", r"\blin_api_[A-Za-z0-9]{40}\b", 0),
        ("age secret key", r"\bAGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}\b", 0),
        ("Discord webhook", r"discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{60,}", 0),
        # KeywordDetector reads neither Go's := nor an XML element holding the value.
        ("Secret Keyword", r"(?:password|passwd|secret)\w*\s*:=\s*['\"`]?+(?![$<{*%])"
         r"[^\s'\"`]{6,}", re.IGNORECASE),
        ("Secret Keyword", r"<(password|passwd|secret|api_?key|token)>\s*(?![$<{*%])"
         r"[^<\s]{6,}\s*</\1>", re.IGNORECASE),
    )
)

#: detect-secrets plugins left out, by class name (see the module docstring).
_LEFT_OUT = frozenset({"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"})
#: Every keyword regex needs one of these after its keyword (``:``, ``=``, ``==``, ``;``).
_ASSIGNMENT = re.compile(r"[:=;]")
_LONG_RUN = re.compile(r"\w{65,}|\s{65,}")
#: Texts up to this long are cached: labels, keys and op names repeat from command to command.
_CACHED_UP_TO = 256
_NO_TEXT = frozenset({float, int, bool, UUID, datetime, type(None)})


#: A run of Z85 characters (ZeroMQ RFC 32) long enough to hold a CURVE key.
_Z85_RUN = re.compile(r"[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40,}")
#: Z85 characters a sentence or a bracket puts around a word, stripped from a run's ends.
_Z85_AROUND_START, _Z85_AROUND_END = "([{<", ".:)]}>"
#: A 32-byte random key in Z85 has about 31 distinct characters of its 40; a word, a
#: path or an identifier that long has far fewer.
_Z85_DISTINCT = 24


def _z85_key(text: str) -> bool:
    """Whether ``text`` holds a bare 40-character Z85 CURVE key.

    A secret key and a public key have the same shape, so every bare one is taken for a
    secret: a field that holds a public key by its meaning (an access grant's
    ``public_key``) is left out of the screen by its caller, and validated as a key.
    A run counts when it is exactly 40 characters once brackets and sentence
    punctuation at its ends are stripped, mixes upper and lower case, holds a character
    that is neither a letter nor a digit, and has at least :data:`_Z85_DISTINCT` distinct
    characters: a git hash (hex), a lower-case path or an identifier does not qualify.
    A random key misses the test about 5 times in 10**5 (measured over 200,000 keys).
    """
    for match in _Z85_RUN.finditer(text):
        start, end = match.span()  # indices, not slices: a long run stays linear
        if end - start > 40 and text[start] in _Z85_AROUND_START:
            start += 1
        while end - start > 40 and text[end - 1] in _Z85_AROUND_END:
            end -= 1
        if end - start != 40:
            continue
        run = text[start:end]
        if (not run.islower() and not run.isupper() and not run.isalnum()
                and len(set(run)) >= _Z85_DISTINCT):
            return True
    return False


_PASSWORD_FLAG = re.compile(r"\s-p(\s+)?['\"]?+(?![$<{*%\s])[^\s'\"]{4,}")
#: The commands whose -p takes a password attached (-pPASSWORD; a bare -p prompts) …
_ATTACHED_P = re.compile(r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb)\b")
#: … and those whose -p takes it after a space.
_SPACED_P = re.compile(r"\b(?:sshpass|docker\s+login)\b")
_COMMAND_BREAK = re.compile(r"[\n|;&]")


def _password_flag(text: str) -> bool:
    """Whether ``text`` passes a password with ``-p`` to a command whose -p is one.

    Elsewhere ``-p`` is a port (ssh, docker run) or ``--parents`` (mkdir), so the flag
    counts only after ``mysql``-family clients (attached: ``-pPASSWORD``), ``sshpass``
    or ``docker login`` (``-p PASSWORD``) in the same command, at most 200 characters
    before it. Each command word and each flag is found once, so this stays linear.
    """
    if "-p" not in text:
        return False
    commands = {kind: [m.start() for m in regex.finditer(text)]
                for kind, regex in ((False, _ATTACHED_P), (True, _SPACED_P))}
    if not commands[False] and not commands[True]:
        return False
    breaks = [m.start() for m in _COMMAND_BREAK.finditer(text)]
    for match in _PASSWORD_FLAG.finditer(text):
        starts = commands[match.group(1) is not None]
        i = bisect.bisect_left(starts, match.start())
        if i == 0 or match.start() - starts[i - 1] > 200:
            continue
        # A newline, pipe, ; or & between them: the flag is another command's.
        j = bisect.bisect_left(breaks, starts[i - 1])
        if j == len(breaks) or breaks[j] > match.start():
            return True
    return False


_CURL_USER = re.compile(
    r"(?:^|\s)(?:-u|--user)(?:\s+|=)['\"]?+[^\s:'\"]+:(?![$<{*%])[^\s'\"]{4,}")


def _curl_user(text: str) -> bool:
    """Whether ``text`` is a ``curl`` command line with ``-u USER:PASSWORD``.

    BasicAuthDetector reads only URLs. Elsewhere ``-u 1000:1000`` (docker) is a user and
    group, so the flag counts only beside ``curl``.
    """
    return "curl" in text and _CURL_USER.search(text) is not None


_NPM_ANCHOR = re.compile(r"(?=/:_authToken=\s*(?:npm_.|[A-Fa-f0-9-]{36}))")
_OPENAI_RUN = re.compile(r"[A-Za-z0-9_-]+")
_ALNUM20 = re.compile(r"[A-Za-z0-9]{20}")


def _npm_token(text: str) -> bool:
    r"""Whether ``//.+/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*`` matches, in linear time.

    It does when an anchor (``/:_authToken=`` and a token) has a ``//`` before it on its
    line with at least one character between; the line's first ``//`` is the best one.
    """
    line = searched = previous = 0  # the anchor's line, how far it was searched for //
    first = -1  # the line's first //, once found
    for anchor in _NPM_ANCHOR.finditer(text):
        at = anchor.start()
        newline = text.rfind("\n", previous, at)
        if newline >= 0:
            line = searched = newline + 1
            first = -1
        previous = at
        if first < 0:
            first = text.find("//", max(line, searched - 1), at)
            searched = at
        if first >= 0 and first + 3 <= at:
            return True
    return False


def _openai_token(text: str) -> bool:
    """Whether ``sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}`` matches, linearly.

    A match lies in one run of ``[A-Za-z0-9_-]``: the run's first ``sk-`` must end at
    least 20 characters before a marker that has 20 letters or digits on each side.
    """
    for run in _OPENAI_RUN.finditer(text):
        word = run.group()
        first = word.find("sk-")
        if first < 0 or "T3BlbkFJ" not in word:
            continue
        at = word.find("T3BlbkFJ")
        while at >= 0:
            if (at - 20 >= first + 3 and _ALNUM20.fullmatch(word, at - 20, at)
                    and _ALNUM20.match(word, at + 8)):
                return True
            at = word.find("T3BlbkFJ", at + 1)
    return False


_JWT_RUN = re.compile(r"(?<![A-Za-z0-9_=-])[A-Za-z0-9_=-]+")
_JWT_CLASS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=-")


def _jwt_screen(text: str) -> bool:
    r"""A linear necessary condition for ``eyJ[A-Za-z0-9-_=]+\.[A-Za-z0-9-_=]+…``.

    ``eyJ`` and one more character must end a run of that class right before a ``.`` and
    another character of it. The regex itself, searched for, scans a dotless run once
    per ``eyJ`` in it (37 ms for 8192 characters of ``eyJeyJ…``).
    """
    for run in _JWT_RUN.finditer(text):
        end = run.end()
        if (text.startswith(".", end) and end + 1 < len(text) and text[end + 1] in _JWT_CLASS
                and text.find("eyJ", run.start(), end - 1) >= 0):
            return True
    return False


#: Screens that stand in for a plugin regex's own search as the condition for running
#: the plugin (the plugin still decides): necessary conditions checked in linear time.
_SCREENS: dict[str, Callable[[str], bool]] = {
    r"eyJ[A-Za-z0-9-_=]+\.[A-Za-z0-9-_=]+\.?[A-Za-z0-9-_.+/=]*?": _jwt_screen,
}

#: detect-secrets regexes that backtrack quadratically, by their source, and a function
#: answering exactly as each does in linear time. Each plugin here only yields the
#: regex's matches, so the function stands in for the plugin too.
_LINEAR: dict[str, Callable[[str], bool]] = {
    r"\/\/.+\/:_authToken=\s*((npm_.+)|([A-Fa-f0-9-]{36})).*": _npm_token,
    r"sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}": _openai_token,
}


class _Detector:
    """detect-secrets' plugins, built once; :func:`_detector` makes the one instance."""

    def __init__(self) -> None:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.filters import heuristic
        from detect_secrets.plugins import keyword
        from detect_secrets.plugins.base import RegexBasedDetector

        # Typed with an unbound TypeVar upstream; each value is a plugin class.
        classes = cast("dict[str, type[BasePlugin]]", get_mapping_from_secret_type_to_class())
        plugins = [(name, cls()) for name, cls in classes.items()
                   if cls.__name__ not in _LEFT_OUT and cls is not keyword.KeywordDetector]
        #: (a test that must pass first, or None; the kind; the plugin, or None when the
        #: test alone decides)
        self.patterns: list[tuple[Callable[[str], object] | None, str, BasePlugin | None]] = []
        #: The sources of the plugin regexes replaced by :data:`_LINEAR` or :data:`_SCREENS`.
        self.replaced: set[str] = set()
        for name, plugin in plugins:
            if isinstance(plugin, RegexBasedDetector):
                # RegexBasedDetector.analyze_string (the JWT plugin then checks what it
                # found) yields nothing unless one of its denylist patterns matches.
                for pattern in plugin.denylist:
                    linear = _LINEAR.get(pattern.pattern)
                    if linear is not None and type(plugin).analyze_string is (
                            RegexBasedDetector.analyze_string):
                        self.replaced.add(pattern.pattern)
                        self.patterns.append((linear, name, None))
                    else:
                        screen = _SCREENS.get(pattern.pattern)
                        if screen is not None:
                            self.replaced.add(pattern.pattern)
                        self.patterns.append((screen or pattern.search, name, plugin))
            else:
                self.patterns.append((None, name, plugin))
        self.patterns += [(pattern.search, name, None) for name, pattern in _OURS]
        self.patterns.append((_z85_key, "CURVE key (Z85)", None))
        self.patterns.append((_curl_user, "Basic Auth Credentials", None))
        self.patterns.append((_password_flag, "Secret Keyword", None))
        self.keyword_type = str(keyword.KeywordDetector.secret_type)
        self.keyword_regexes = list(keyword.CONFIG_DENYLIST_REGEX_TO_GROUP.items())
        # Each keyword regex holds the denylist alternation: a necessary condition.
        self.keywords = re.compile("|".join(keyword.DENYLIST), re.IGNORECASE)
        self.heuristic = heuristic
        self.indirect = heuristic._get_indirect_reference_regex()

    def find(self, text: str) -> str | None:
        """The kind of the first credential found in ``text``, else None."""
        for test, name, plugin in self.patterns:
            if (test is None or test(text)) and (
                    plugin is None or any(True for _ in plugin.analyze_string(text))):
                return name
        if self.keywords.search(text) and _ASSIGNMENT.search(text):
            lines = (_LONG_RUN.sub(lambda m: m.group()[-64:], line) for line in text.splitlines())
            if any(self._assigns_a_secret(part) for line in lines for part in _windows(line)):
                return self.keyword_type
        return None

    def _assigns_a_secret(self, line: str) -> bool:
        for regex, group in self.keyword_regexes:
            pos = 0
            while (match := regex.search(line, pos)) is not None:
                if not self._harmless(match.group(group), line, match.start()):
                    return True
                pos = max(match.start(group), match.start() + 1)
        return False

    def _harmless(self, value: str, line: str, start: int) -> bool:
        """detect-secrets' heuristics for a keyword's value that is no secret."""
        h = self.heuristic
        return (h.is_templated_secret(value) or h.is_prefixed_with_dollar_sign(value)
                or h.is_sequential_string(value) or h.is_potential_uuid(value)
                or h.is_not_alphanumeric_string(value)
                or self.indirect.match(line, start) is not None)


_WINDOW = 512


def _windows(line: str) -> Iterator[str]:
    """A long line as overlapping windows of 512 characters, each 256 past the last.

    Every assignment starts in the first half of some window, so it is judged there on
    at least 256 characters of its value. Without windows each keyword in a line of
    harmless assignments (``password=vault.get(a) password=…``) scanned the rest of the
    line: 8192 characters of them took 100 ms.
    """
    if len(line) <= _WINDOW:
        yield line
        return
    step = _WINDOW // 2
    for start in range(0, len(line) - step, step):
        yield line[start:start + _WINDOW]


@cache
def _detector() -> _Detector:
    """Built on first use: importing detect-secrets takes about 0.1 s."""
    return _Detector()


def warm_up() -> None:
    """Build the detector now rather than on the first text screened.

    A server calls it before it serves: built lazily, the first command pays the import
    and plugin set-up (0.1 s idle, seconds on a loaded machine with other threads
    wanting the interpreter), and every request behind it waits.
    """
    _detector()


@lru_cache(maxsize=8192)
def _cached(text: str) -> str | None:
    return _detector().find(text)


def credential_in(text: str) -> str | None:
    """The kind of credential ``text`` looks like (a detect-secrets secret type), else None.

    The text is read as written and, when that differs, folded (format characters such as
    zero-width spaces dropped, NFKC), so ``AKIA\u200b…`` is the key it hides.
    """
    if not text.strip():
        return None
    if text.isascii():  # its own folding: one reading (most texts, and at a hub's rate)
        return _cached(text) if len(text) <= _CACHED_UP_TO else _detector().find(text)
    for reading in dict.fromkeys([text, folded(text)]):
        kind = _cached(reading) if len(reading) <= _CACHED_UP_TO else _detector().find(reading)
        if kind is not None:
            return kind
    return None


def text_fields(value: object, path: str = "$",
                skip: Collection[str] = ()) -> Iterator[tuple[str, str]]:
    """Every string in ``value`` (a Struct, dict, list or str) with its JSON path.

    A dict's keys are named ``<path> (a name)``. Top-level fields named in ``skip`` are
    left out.
    """
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            if name not in skip:
                yield from text_fields(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from text_fields(key, f"{path} (a name)")
            yield from text_fields(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if type(item) not in _NO_TEXT:  # at once: a vector holds thousands of floats
                yield from text_fields(item, f"{path}[{i}]")


def credential_field(value: object, skip: Collection[str] = (),
                     path: str = "$") -> tuple[str, str] | None:
    """The first (JSON path, kind of credential) among the strings of ``value``, else None.

    ``skip`` names top-level fields left out; ``path`` is ``value``'s own JSON path.
    """
    texts: list[str] = []
    _strings(value, texts, skip)
    if not any(credential_in(text) is not None for text in texts):
        return None
    # Only a refusal needs the path: building one for every string cost more than the
    # screen itself (every command and submission a hub takes passes here).
    for where, text in text_fields(value, path, skip=skip):
        kind = credential_in(text)
        if kind is not None:
            return where, kind
    return None


def joined_operation(operations: Iterable[object], path: str = "$") -> tuple[str, str] | None:
    """The first operation whose op and target joined look like a credential, else None.

    Joined as the outcome statistics key them (``--password hunter2``); returned as
    (JSON path, kind of credential).
    """
    for i, operation in enumerate(operations):
        op, target = getattr(operation, "op", ""), getattr(operation, "target", "")
        kind = credential_in(f"{op} {target}") if op and target else None
        if kind is not None:
            return f"{path}.operations[{i}]", kind
    return None


def _strings(value: object, out: list[str], skip: Collection[str] = ()) -> None:
    """Append every string :func:`text_fields` yields for ``value``, in its order."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            if name not in skip:
                item = getattr(value, name)
                if type(item) not in _NO_TEXT:
                    _strings(item, out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _strings(key, out)
            _strings(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            if type(item) not in _NO_TEXT:
                _strings(item, out)
