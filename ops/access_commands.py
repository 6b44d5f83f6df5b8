"""``lessonledger keys`` and ``access``: client key pairs, and who may use the hub.

``keys new NAME`` makes a CURVE key pair on the machine that will use it. The public
file (``NAME.key``) goes to the hub's admin, who runs ``access grant NAME`` on the hub's
home: the grant is an ``AccessGranted`` event in the log, so an auditor sees who could
do what and from when. Local access to the home is admin access; over the hub, granting
needs an admin grant. Each command here is a ``_cmd_*`` function and a few lines in
:func:`register`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any
from uuid import uuid4

from lessonledger.commands.access import GrantAccess, RevokeAccess, check_public_key
from lessonledger.commands.errors import UnknownKeyError
from lessonledger.commands.messages import checked_command, command_from
from lessonledger.commands.refusals import refuse_credentials
from lessonledger.ops.config import keys_dir
from lessonledger.ops.hub_commands import add_remote, remote
from lessonledger.ops.lesson_commands import open_lessons, open_queries
from lessonledger.ops.render import echo, print_json
from lessonledger.projections.access import Grant
from lessonledger.sync.keys import load_public, new_keys, public_path

__all__ = ["register"]


def _cmd_keys_new(args: argparse.Namespace) -> int:
    directory = args.dir or keys_dir()
    public, secret = new_keys(directory, args.name)
    key = load_public(public).decode()
    if args.json:
        print_json({"name": args.name, "public": str(public), "secret": str(secret),
                    "public_key": key})
    else:
        echo(f"wrote {public} (public: give it to the hub's admin) and {secret} "
             "(secret: never leaves this machine)")
        echo(f"public key: {key}")
    return 0


def _grant_json(grant: Grant) -> dict[str, Any]:
    return {"key_name": grant.key_name, "public_key": grant.public_key,
            "principal": grant.principal, "read": sorted(grant.read),
            "write": sorted(grant.write), "admin": grant.admin,
            "granted_at": grant.granted_at}


def _describe(grant: Grant) -> str:
    read = ", ".join(sorted(grant.read)) or "global lessons only"
    write = ", ".join(sorted(grant.write)) or "nothing"
    admin = "; admin" if grant.admin else ""
    return (f"{grant.key_name}: principal {grant.principal}; reads {read}; writes "
            f"{write}{admin} (granted at position {grant.granted_at:,})")


def _cmd_grant(args: argparse.Namespace) -> int:
    path = args.key or public_path(keys_dir(), args.name)
    public = load_public(path, public_only=True).decode()
    # Every check before the home is opened: a refused grant writes nothing at all.
    command = checked_command(command_from({
        "key": f"grant:{uuid4()}", "key_name": args.name, "public_key": public,
        "principal": args.principal, "read": args.read, "write": args.write,
        "admin": args.admin, "actor": args.by}, GrantAccess))
    check_public_key(command.public_key)
    refuse_credentials(command)
    if args.to is not None:
        # The hub records the admin bound to --key-file as the actor, not --by.
        with remote(args) as hub:
            receipt = hub.execute(command)
        grant = Grant(key_name=command.key_name, public_key=command.public_key,
                      principal=command.principal, read=frozenset(command.read),
                      write=frozenset(command.write), admin=command.admin,
                      granted_at=receipt.positions[0])
    else:
        with open_lessons(args.home) as ledger:
            receipt = ledger.execute(command)
            found = ledger.grant_for(public)
        assert found is not None
        grant = found
    if args.json:
        print_json({"position": receipt.positions[0], **_grant_json(grant)})
    else:
        echo(f"granted {_describe(grant)}")
    return 0


def _cmd_revoke(args: argparse.Namespace) -> int:
    command = checked_command(command_from({
        "key": f"revoke:{uuid4()}", "key_name": args.name, "actor": args.by}, RevokeAccess))
    refuse_credentials(command)
    if args.to is not None:
        with remote(args) as hub:  # the hub refuses an unknown name itself
            receipt = hub.execute(command)
        return _revoked(args, receipt.positions[0])
    with open_queries(args.home) as reader:
        # Asked on the read side first, so an unknown name opens no writer.
        if not any(g.key_name == args.name for g in reader.grants()):
            raise UnknownKeyError(args.name)
    with open_lessons(args.home) as ledger:
        receipt = ledger.execute(command)
    return _revoked(args, receipt.positions[0])


def _revoked(args: argparse.Namespace, position: int) -> int:
    if args.json:
        print_json({"key_name": args.name, "position": position})
    else:
        echo(f"revoked {args.name} at position {position:,}: its next connection is "
             "refused")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    with open_queries(args.home) as reader:
        grants = reader.grants()
    if args.json:
        print_json([_grant_json(g) for g in grants])
    elif not grants:
        print("no key has a grant; grant one with `lessonledger access grant NAME "
              "--principal P`")
    else:
        for grant in grants:
            echo(_describe(grant))
    return 0


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one line of JSON")


def register(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Add ``keys`` and ``access`` to the CLI's sub-parsers."""
    keys = sub.add_parser("keys", help="make CURVE key pairs for talking to a hub")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True, metavar="COMMAND",
                                   parser_class=parser_class)
    new = keys_sub.add_parser("new", help="write a new key pair NAME.key and NAME.key_secret",
                              description=(
        "Writes NAME.key (the public key: give it to the hub's admin, who grants it) and "
        "NAME.key_secret (readable by you only; it never leaves this machine) into the "
        "key directory. An existing pair is never overwritten."))
    new.add_argument("name", metavar="NAME", help=(
        "the key's name: letters, digits, '_', '.', '-' (for example ada-laptop)"))
    new.add_argument("--dir", type=Path, default=None, metavar="D", help=(
        "key directory (default: $LESSONLEDGER_KEYS, else ~/.lessonledger-keys)"))
    _json_flag(new)
    new.set_defaults(run=_cmd_keys_new)

    access = sub.add_parser("access", help=(
        "grant, revoke and list which client keys may use the hub, as whom"))
    access_sub = access.add_subparsers(dest="access_command", required=True,
                                       metavar="COMMAND", parser_class=parser_class)
    grant = access_sub.add_parser("grant", help="let a client key use the hub", description=(
        "Records an AccessGranted event: the key may connect as PRINCIPAL (the principal "
        "on every event the hub writes for it), read the lessons of the --read projects "
        "(global lessons come with any grant), write to the --write projects, and with "
        "--admin erase and grant. A new grant for a key replaces its previous one. Run "
        "on the hub's home, or with --to through a running hub by an admin key (the hub "
        "then records that key's principal as who granted, not --by)."))
    grant.add_argument("name", metavar="NAME", help="the key's name (as in `keys new NAME`)")
    grant.add_argument("--principal", required=True, metavar="P", help=(
        "whose key it is: stamped on every event the hub writes for it"))
    grant.add_argument("--read", nargs="+", default=[], metavar="PROJECT", help=(
        "project digests (or 'global') whose lessons it may read"))
    grant.add_argument("--write", nargs="+", default=[], metavar="PROJECT", help=(
        "project digests (or 'global') it may write to"))
    grant.add_argument("--admin", action="store_true", help="may erase and grant")
    grant.add_argument("--key", type=Path, default=None, metavar="PATH", help=(
        "the public key file (default: <key directory>/NAME.key); never a secret file"))
    grant.add_argument("--by", default="operator", metavar="WHO", help=(
        "who grants, recorded as the event's actor (default: operator)"))
    add_remote(grant, key_flag="--key-file")
    _json_flag(grant)
    grant.set_defaults(run=_cmd_grant)

    revoke = access_sub.add_parser("revoke", help="refuse a key from its next connection",
                                   description=(
        "Records an AccessRevoked event: the key's next connection is refused, and a hub "
        "refuses its requests on a connection already open."))
    revoke.add_argument("name", metavar="NAME", help="the key's name")
    revoke.add_argument("--by", default="operator", metavar="WHO", help=(
        "who revokes, recorded as the event's actor (default: operator)"))
    add_remote(revoke, key_flag="--key-file")
    _json_flag(revoke)
    revoke.set_defaults(run=_cmd_revoke)

    listed = access_sub.add_parser("list", help="show every current grant")
    _json_flag(listed)
    listed.set_defaults(run=_cmd_list)
