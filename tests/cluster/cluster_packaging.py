"""The package as a user ships it to a cluster, and a node Python that does not have it installed.

:func:`package_zip` is what ``spark-submit --py-files`` takes: the
``kinesis_src``, ``lineage`` and ``pyspark_kinesis`` packages at the zip's
root (Python source only), built from this checkout.

:func:`node_python` is a Python with kinesis-src's dependencies (pyspark,
pyarrow, boto3, ...) but not kinesis-src, as on a cluster node where only
the dependencies are installed: a venv of the test's base interpreter whose
one ``.pth`` line adds this venv's site-packages. Python does not read
``.pth`` files in a directory added that way, so the editable install's
``.pth`` (which puts the checkout on ``sys.path``) is not applied.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("kinesis_src", "lineage", "pyspark_kinesis")


def package_zip(target: Path) -> Path:
    """``target`` written as a zip of the packages' ``.py`` files, paths relative to the checkout."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in PACKAGES:
            for path in sorted((REPO / package).rglob("*.py")):
                archive.write(path, path.relative_to(REPO).as_posix())
    return target


def node_python(directory: Path) -> Path:
    """A venv in ``directory`` that sees this venv's dependencies but cannot import kinesis_src; its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(directory)], check=True, timeout=120)
    python = directory / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "kinesis-src-deps.pth").write_text("".join(f"{path}\n" for path in sorted(ours)))
    return python


def importable(python: Path, module: str, env: dict[str, str]) -> bool:
    """Whether ``python`` can import ``module`` with ``env`` (run outside the checkout)."""
    probe = subprocess.run([str(python), "-c", f"import {module}"], env=env, cwd="/", capture_output=True, timeout=120)
    return probe.returncode == 0


def node_env(base: dict[str, str], python: Path) -> dict[str, str]:
    """``base`` for a cluster process: the node Python for every PySpark process, no PYTHONPATH, no user site."""
    env = {key: value for key, value in base.items() if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=str(python),
        PYSPARK_DRIVER_PYTHON=str(python),
        PYTHONNOUSERSITE="1",
        SPARK_NO_DAEMONIZE="1",
    )
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    return env
