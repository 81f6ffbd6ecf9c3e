#!/usr/bin/env python3
"""The testing kit as a ``pip install kinesis-src`` user gets it: from a wheel, outside the checkout.

    .venv/bin/python localstack/kit_from_wheel.py            # what CI runs (`make kit-from-wheel`)
    .venv/bin/python localstack/kit_from_wheel.py --source DIR --keep-going   # e.g. an older tree's wheel

Steps, each timed:

1. build the wheel of ``--source`` (default: this checkout) with ``pip wheel --no-deps``, from a
   clean copy of the files the build reads;
2. outside the namespace, ``pip download`` the wheel's dependencies and pytest (pinned to what
   the checkout's virtualenv runs, so pip's cache serves them), then create a fresh virtualenv
   under a temp dir and install them offline (``--no-index``);
3. outside the namespace, the kit's install command in that virtualenv
   (``python -m kinesis_src.testing install``: java/node wheels where missing, npm ci), into a
   fresh per-user cache (``XDG_CACHE_HOME`` in the temp dir; npm's own cache is reused);
4. copy ``examples/test_user_pipeline.py`` into an empty folder and run
   ``python -m pytest --kinesis-require-endpoints test_user_pipeline.py`` there through the
   installed package's namespace runner (``python -m kinesis_src.testing isolated``: no network,
   loopback up, ``KINESIS_SRC_ISOLATED=1``), with no PYTHONPATH and nothing of the checkout on PATH.

It passes only if pytest passes and the plugin's summary line says the emulators were started by
the installed package from the temp cache, naming no path of the checkout. Exit code 0 on
success, 1 on a failed check (the reason is printed). Stdlib only.
"""

from __future__ import annotations

import argparse
import configparser
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "test_user_pipeline.py"
SUMMARY = "kinesis_src.testing: embedded endpoints"
# What the example needs beyond the wheel's own requirements.
EXTRA_REQUIREMENTS = ("pytest",)


class CheckFailed(RuntimeError):
    """A step failed or its result was not what a wheel user must see; the message says which."""


@dataclass(frozen=True)
class Layout:
    """The temp directories of one run: wheels, the fresh virtualenv, the user's cache and project."""

    root: Path

    @property
    def wheels(self) -> Path:
        return self.root / "wheels"

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def project(self) -> Path:
        return self.root / "project"


def run(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
        what: str, timeout: float = 900.0) -> str:
    """Run a step; return its combined output, or raise CheckFailed with the output's tail."""
    started = time.monotonic()
    result = subprocess.run(list(argv), env=None if env is None else dict(env), cwd=cwd, capture_output=True,
                            text=True, timeout=timeout, check=False)
    output = result.stdout + result.stderr
    print(f"kit_from_wheel: {what}: exit {result.returncode} in {time.monotonic() - started:.1f}s", flush=True)
    if result.returncode != 0:
        tail = "\n".join(output.rstrip().splitlines()[-60:])
        raise CheckFailed(f"{what} failed (exit {result.returncode}): {' '.join(argv)}\n{tail}")
    return output


def user_env(layout: Layout) -> dict[str, str]:
    """A wheel user's environment: no PYTHONPATH, no virtualenv or endpoint settings, nothing of the checkout."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("KINESIS_SRC_", "AWS_ENDPOINT_URL", "PYTHON", "PIP_", "VIRTUAL_ENV", "JAVA_HOME"))}
    path = [entry for entry in env.get("PATH", "").split(os.pathsep) if entry and not entry.startswith(str(REPO))]
    env["PATH"] = os.pathsep.join([str(layout.venv / "bin"), *path])
    env["XDG_CACHE_HOME"] = str(layout.cache)
    return env


def clean_copy(source: Path, into: Path) -> Path:
    """The files a build reads, copied: an in-tree build would reuse ``build/lib``, keeping modules since deleted."""
    config = configparser.ConfigParser()
    config.read(source / "setup.cfg")
    includes = config.get("options.packages.find", "include", fallback="").split()
    top_level = sorted({name.split(".")[0] for name in includes})
    into.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "setup.py", "README.md", "LICENSE", "MANIFEST.in"):
        if (source / name).is_file():
            shutil.copy2(source / name, into / name)
    for name in top_level:
        shutil.copytree(source / name, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


def build_wheel(source: Path, layout: Layout) -> Path:
    tree = clean_copy(source, layout.root / "source")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(tree), "-w", str(layout.root / "dist")],
        what="build the wheel")
    (wheel,) = (layout.root / "dist").glob("kinesis_src-*.whl")
    return wheel


def pinned_constraints(layout: Layout) -> Path:
    """The checkout virtualenv's versions as pip constraints, so the downloads come from pip's cache."""
    frozen = run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], what="read the checkout's versions")
    kept = [line for line in frozen.splitlines() if "==" in line and not line.lower().startswith("kinesis")]
    path = layout.root / "constraints.txt"
    path.write_text("\n".join(kept) + "\n")
    return path


def fresh_venv(wheel: Path, layout: Layout, constraints: Path | None) -> None:
    """Download outside the namespace, then install the wheel and pytest into a new venv with no index."""
    limits = ["-c", str(constraints)] if constraints else []
    run([sys.executable, "-m", "pip", "download", "--quiet", "-d", str(layout.wheels), *limits, str(wheel),
         *EXTRA_REQUIREMENTS], what="download the wheel's requirements and pytest")
    run([sys.executable, "-m", "venv", str(layout.venv)], what="create a fresh virtualenv")
    run([str(layout.python), "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(layout.wheels),
         str(wheel), *EXTRA_REQUIREMENTS], env=user_env(layout), cwd=layout.root, what="install offline")


def kit_install(layout: Layout) -> None:
    """The documented install command, with network (outside the namespace), into the fresh user cache."""
    run([str(layout.python), "-m", "kinesis_src.testing", "install"], env=user_env(layout), cwd=layout.project,
        what="python -m kinesis_src.testing install")


def run_example(layout: Layout, runner: str) -> str:
    """The example's tests in an empty folder, in a private network namespace; returns pytest's output."""
    shutil.copy2(EXAMPLE, layout.project / EXAMPLE.name)
    pytest = [str(layout.python), "-m", "pytest", "--kinesis-require-endpoints", "-p", "no:cacheprovider",
              EXAMPLE.name]
    if runner == "installed":
        command = [str(layout.python), "-m", "kinesis_src.testing", "isolated", "--no-install", "--", *pytest]
    else:  # the checkout's runner: for a wheel that has none (an older tree)
        command = [sys.executable, str(REPO / "localstack" / "launcher.py"), "isolated", "--no-install", "--", *pytest]
    return run(command, env=user_env(layout), cwd=layout.project, what=f"pytest {EXAMPLE.name} in the namespace")


def check_origin(output: str, layout: Layout) -> str:
    """The plugin's summary line must name the installed package and the temp cache, and no checkout path."""
    lines = [line for line in output.splitlines() if line.startswith(SUMMARY)]
    if not lines:
        raise CheckFailed(f"no '{SUMMARY}' line in pytest's output: the embedded emulators did not serve the tests")
    line = lines[-1]
    site = run([str(layout.python), "-c", "import kinesis_src, pathlib; print(pathlib.Path(kinesis_src.__file__)"
                ".resolve().parent)"], env=user_env(layout), cwd=layout.project, what="locate the installed package")
    package = Path(site.strip().splitlines()[-1])
    expected = [str(package / "testing" / "emulators"), str(layout.cache / "kinesis-src" / "emulators")]
    if not package.is_relative_to(layout.venv) or not all(part in line for part in expected):
        raise CheckFailed(f"the emulators did not come from the installed package: {line!r} (expected {expected})")
    if str(REPO) in line:
        raise CheckFailed(f"the emulators came from the checkout {REPO}: {line!r}")
    return line


def pytest_verdict(output: str) -> str:
    """pytest's closing line (``2 passed in 9.81s``), for the log."""
    return next((line.strip("= ") for line in reversed(output.splitlines()) if " in " in line and "passed" in line), "?")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kit_from_wheel.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=REPO, help="source tree to build the wheel from")
    parser.add_argument("--keep-going", action="store_true", help="run the example even if the install step failed")
    parser.add_argument("--runner", choices=("installed", "checkout"), default="installed",
                        help="whose namespace runner runs pytest (checkout: for a wheel without one)")
    parser.add_argument("--no-constraints", action="store_true",
                        help="resolve the newest allowed versions instead of the checkout virtualenv's")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (printed) for inspection")
    args = parser.parse_args(argv)
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="kinesis-src-kit-from-wheel-"))
    layout = Layout(root)
    layout.project.mkdir()
    try:
        wheel = build_wheel(args.source.resolve(), layout)
        fresh_venv(wheel, layout, None if args.no_constraints else pinned_constraints(layout))
        try:
            kit_install(layout)
        except CheckFailed as exc:
            if not args.keep_going:
                raise
            print(f"kit_from_wheel: {exc}\nkit_from_wheel: going on (--keep-going)", flush=True)
        output = run_example(layout, args.runner)
        line = check_origin(output, layout)
        print(f"kit_from_wheel: pytest: {pytest_verdict(output)}")
    except CheckFailed as exc:
        print(f"kit_from_wheel: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kit_from_wheel: kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(f"kit_from_wheel: {line}")
    print(f"kit_from_wheel: OK: the kit ran from {wheel.name} in a fresh virtualenv "
          f"in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
