#!/usr/bin/env python3
"""Run a command as on a machine without some tools: the "only Python" proof (``make demo-python-only``).

    python localstack/hide_tools.py java node npm -- make toolchain demo

The command sees a PATH of one directory holding a symlink to every
executable on the real PATH except the named ones, and no JAVA_HOME: so
``make``, ``unshare``, ``ip`` and ``python3`` still resolve, while ``java``,
``node`` and ``npm`` are gone and ``toolchain.py`` must take the wheels.
Stdlib only.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

LOG = logging.getLogger("kinesis_src.hide_tools")


class StillVisibleError(RuntimeError):
    """A tool meant to be hidden is still found on the PATH built for the command."""


def path_without(hidden: Sequence[str], path: str, into: Path) -> str:
    """A PATH of one directory of symlinks to every executable on ``path`` except the ``hidden`` names.

    The first occurrence of a name wins, as on the real PATH; so every other
    tool (make, unshare, ip, python3) still resolves.
    """
    into.mkdir(parents=True, exist_ok=True)
    for directory in path.split(os.pathsep):
        if not directory or not Path(directory).is_dir():
            continue
        for entry in sorted(Path(directory).iterdir()):
            target = into / entry.name
            if entry.name in hidden or target.exists() or target.is_symlink():
                continue
            if entry.is_file() and os.access(entry, os.X_OK):
                target.symlink_to(entry)
    return str(into)


def run_without(hidden: Sequence[str], argv: Sequence[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="kinesis-src-path-") as scratch:
        env = dict(os.environ)
        env["PATH"] = path_without(hidden, env.get("PATH", ""), Path(scratch) / "bin")
        env.pop("JAVA_HOME", None)
        for name in hidden:
            if shutil.which(name, path=env["PATH"]):
                raise StillVisibleError(f"{name} is still on PATH")
        LOG.info("running with %s hidden from PATH: %s", ", ".join(hidden), shlex.join(argv))
        return subprocess.run(list(argv), env=env, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if "--" not in words or words.index("--") in (0, len(words) - 1):
        raise SystemExit("hide_tools.py: name the tools, then the command: `hide_tools.py java node npm -- CMD`")
    cut = words.index("--")
    logging.basicConfig(level=logging.INFO, format="hide_tools: %(levelname)s: %(message)s", stream=sys.stderr)
    try:
        return run_without(words[:cut], words[cut + 1:])
    except StillVisibleError as exc:
        LOG.error("%s", exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
