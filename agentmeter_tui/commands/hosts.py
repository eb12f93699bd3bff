"""``agentmeter hosts accept TARGET`` and ``agentmeter hosts check SUITE``.

``accept`` is the one explicit step that trusts a new SSH host: it shows the host key's
fingerprint and, once confirmed (``--yes`` for scripts), records it in known_hosts; a host
whose recorded key changed is refused. ``check`` runs the host checks of a suite's sandbox
(reachable, key accepted, docker engine, swarm state, CLIs present, free disk).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

EXIT_FAILED, EXIT_BAD_INPUT = 1, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("hosts", help="accept SSH host keys; check the hosts a suite's sandbox uses")
    actions = parser.add_subparsers(dest="hosts_action", metavar="ACTION", required=True)
    accept = actions.add_parser("accept", help="trust a host's SSH key (shows its fingerprint first)")
    accept.add_argument("target", metavar="TARGET", help="[user@]address[:port] or ssh://user@address:port")
    accept.add_argument("--known-hosts", metavar="FILE",
                        help="the known_hosts file to record it in (default ~/.ssh/known_hosts; use the file "
                             "the suite's [sandbox] known_hosts names)")
    accept.add_argument("--yes", action="store_true", help="do not ask; for scripts that checked the fingerprint")
    accept.set_defaults(handler=accept_command)
    check = actions.add_parser("check", help="check every host of a suite's sandbox")
    check.add_argument("suite", metavar="SUITE", help="suite folder or name")
    check.set_defaults(handler=check_command)


def accept_command(args: argparse.Namespace) -> int:
    from ..core.sandboxes.ssh.conn import HostKeyError, SshTarget, accept_host_key, fetch_host_key

    target = SshTarget.from_url(args.target, known_hosts=args.known_hosts)
    try:
        key = asyncio.run(fetch_host_key(target))
    except (OSError, ConnectionError, Exception) as exc:  # noqa: BLE001 - any failure: say it, exit 1
        print(f"agentmeter hosts: cannot reach {target}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{target.host_pattern}: {key.get_algorithm()} {key.get_fingerprint()}")
    if not args.yes:
        if not sys.stdin.isatty():
            print("agentmeter hosts: not a terminal; check the fingerprint and pass --yes", file=sys.stderr)
            return EXIT_FAILED
        if input("Trust this key? [y/N] ").strip().lower() not in ("y", "yes"):
            print("not recorded")
            return EXIT_FAILED
    try:
        fingerprint, added = asyncio.run(accept_host_key(target))
    except HostKeyError as exc:
        print(f"agentmeter hosts: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{'recorded in' if added else 'already in'} {target.known_hosts_path}: {fingerprint}")
    return 0


def check_command(args: argparse.Namespace) -> int:
    from ..core.sandboxes.hostcheck import check_suite_hosts
    from ..core.suites.load import load_suite
    from ..core.tomlerrors import InputError
    from .run import resolve_suite_path

    try:
        suite = load_suite(resolve_suite_path(args.suite))
    except InputError as exc:
        print(f"agentmeter: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    checks = asyncio.run(check_suite_hosts(suite))
    if not checks:
        print(f"suite {suite.id}: sandbox '{suite.spec.sandbox.kind}' runs on this machine; no hosts to check")
        return 0
    width = max(len(c.subject) for c in checks)
    for check in checks:
        mark = {True: "ok  ", False: "FAIL", None: "--  "}[check.ok]
        print(f"{mark}  {check.subject:<{width}}  {check.detail}" + (f"  -> {check.fix}" if check.fix else ""))
    return EXIT_FAILED if any(c.ok is False for c in checks) else 0
