"""Run a command in a private network namespace with only loopback up (Linux ``unshare``).

The emulators bind every interface. Free of package imports: this file is the namespace's init.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

LOG = logging.getLogger("kinesis_src.launcher")

ENV_ISOLATED = "KINESIS_SRC_ISOLATED"
NS_INIT = "_ns-init"

# Tried in order. The pid namespace makes the inner init pid 1, so when the
# command ends the kernel kills anything it leaked; the mount namespace lets
# the init remount /sys (so /sys/class/net shows the new namespace) and
# /proc. Plain ``--net`` is the last resort.
_UNSHARE_VARIANTS: tuple[tuple[str, ...], ...] = (
    ("--net", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child"),
    ("--net", "--mount"),
    ("--net",),
)

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def unshare_prefix() -> list[str] | None:
    """First unshare invocation that actually works here, or None (e.g. macOS, seccomp)."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return None
    user_flags: list[tuple[str, ...]] = [(), ("--map-root-user",)] if os.geteuid() == 0 else [("--map-root-user",)]
    for user in user_flags:
        for variant in _UNSHARE_VARIANTS:
            prefix = [unshare, *user, *variant]
            probe = subprocess.run([*prefix, "--", "true"], capture_output=True, timeout=10, check=False)
            if probe.returncode == 0:
                return prefix
            LOG.debug("%s unusable: %s", shlex.join(prefix), probe.stderr.decode(errors="replace").strip())
    return None


def run_isolated(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run ``argv`` with ``env`` in a new network namespace (loopback only); return its exit code.

    Already isolated, it runs directly; without namespace support too, with a warning and without
    ``KINESIS_SRC_ISOLATED`` (so the kit refuses to start servers).
    """
    if os.environ.get(ENV_ISOLATED) == "1":
        LOG.debug("already isolated; running command directly")
        return run_forwarding(list(argv), dict(env))
    prefix = unshare_prefix()
    if prefix is None:
        print("launcher: WARNING: cannot create a network namespace (no usable `unshare`); running "
              "the command directly -- emulators will listen on ALL network interfaces and "
              f"{ENV_ISOLATED} is not set", file=sys.stderr)
        return run_forwarding(list(argv), dict(env))
    LOG.debug("isolating with %s", shlex.join(prefix))
    inner = [*prefix, "--", sys.executable, "-P", str(Path(__file__).resolve()), NS_INIT, "--", *argv]
    return run_forwarding(inner, dict(env), find_target=_only_child)


def _only_child(pid: int) -> int:
    """PID of the single child of ``pid`` (unshare's forked child), else ``pid`` itself."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                return int(stat.parent.name)
    return pid


def run_forwarding(argv: list[str], env: dict[str, str],
                   find_target: Callable[[int], int] = lambda pid: pid) -> int:
    """Run a child, relaying SIGTERM/SIGHUP (Ctrl-C reaches it anyway); its code (128+N: killed)."""
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        print(f"launcher: cannot run {shlex.join(argv)}: {exc}", file=sys.stderr)
        return 127

    def relay(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(find_target(child.pid), signum)

    previous = {sig: signal.signal(sig, relay) for sig in (signal.SIGTERM, signal.SIGHUP)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return exit_code(child.wait())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_code(returncode: int) -> int:
    """Shell convention: a child killed by signal N exits 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def loopback_up() -> None:
    """Bring ``lo`` up: ``ip`` when available, else the SIOCSIFFLAGS ioctl directly."""
    ip = shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip", "/bin/ip") if os.access(p, os.X_OK)), None)
    if ip:
        result = subprocess.run([ip, "link", "set", "lo", "up"], capture_output=True, text=True, check=False)
        if result.returncode == 0:
            return
        LOG.debug("ip link set lo up failed: %s", result.stderr.strip())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def _remount_sysfs() -> None:
    """Make /sys/class/net describe this namespace (sysfs shows the mounter's netns)."""
    mount = shutil.which("mount") or "/bin/mount"
    result = subprocess.run([mount, "-t", "sysfs", "sysfs", "/sys"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        LOG.debug("could not remount /sys (%s); /sys/class/net shows the host", result.stderr.strip())


def ns_init(argv: Sequence[str]) -> int:
    """Inside the namespace: loopback up, run the command, reap orphans; nothing outlives pid 1."""

    try:
        loopback_up()
    except OSError as exc:
        print(f"launcher: cannot bring loopback up inside the namespace: {exc}", file=sys.stderr)
        return 125
    _remount_sysfs()
    env = {**os.environ, ENV_ISOLATED: "1"}
    if os.getpid() != 1:
        return run_forwarding(list(argv), env)
    return _init_loop(list(argv), env)


def _init_loop(argv: list[str], env: dict[str, str]) -> int:
    """pid-1 duties: relay SIGTERM/SIGHUP, reap every child, return the command's code."""
    try:
        child = subprocess.Popen(argv, env=env)
    except OSError as exc:
        print(f"launcher: cannot run {shlex.join(argv)}: {exc}", file=sys.stderr)
        return 127
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: _signal_quietly(child.pid, signum))
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)  # keep Popen from waiting again
            _terminate_leftovers()
            return exit_code(child.returncode)


def _signal_quietly(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _describe_pid(pid: int) -> str:
    """``pid (command line)`` for the leftover warning, so a leak can be traced to its test."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmdline = "?"
    return f"{pid} ({cmdline.strip()[:120]})"


def _terminate_leftovers(grace: float = 3.0, settle: float = 2.0) -> None:
    """SIGTERM what the command leaked, after ``settle`` seconds to exit alone, before SIGKILL."""
    leftovers = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and int(p.name) != 1]
    leftovers = _reap_until_gone(leftovers, settle)
    if not leftovers:
        return
    LOG.warning(
        "command left %d process(es) running in the namespace; terminating them: %s",
        len(leftovers), ", ".join(_describe_pid(pid) for pid in leftovers),
    )
    for pid in leftovers:
        _signal_quietly(pid, signal.SIGTERM)
    _reap_until_gone(leftovers, grace)


def _reap_until_gone(pids: list[int], seconds: float) -> list[int]:
    """Reap exited children until every pid is gone or time is up; returns the ones still there."""
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _main(words: Sequence[str]) -> int:
    """``_ns-init -- CMD ...``: the namespace's init (run by :func:`run_isolated`, never by hand)."""
    words = list(words)
    if len(words) < 3 or words[0] != NS_INIT or words[1] != "--":
        print(f"usage: namespace.py {NS_INIT} -- CMD ...", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="launcher: %(levelname)s: %(message)s", stream=sys.stderr)
    return ns_init(words[2:])


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
