#!/usr/bin/env python3
"""Which ``java`` and which ``node`` the emulators, the tests and PySpark use: a checkout's entry point.

The selection lives in :mod:`kinesis_src.testing.emulators.toolchain` (see
its docstring for the rules). ``import toolchain`` (with this directory on
``sys.path``) gives that very module, and the commands are its own::

    python localstack/toolchain.py show             # what would be used, and why
    python localstack/toolchain.py install          # pip-install the wheels where the machine lacks a tool
    python localstack/toolchain.py exec -- CMD      # run CMD with JAVA_HOME/PATH pointing at the choice
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

if importlib.util.find_spec("kinesis_src") is None:  # a Python without the package: use this checkout's
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kinesis_src.testing.emulators import toolchain as _toolchain  # noqa: E402

if __name__ == "__main__":
    sys.exit(_toolchain.main())

sys.modules[__name__] = _toolchain  # `import toolchain` is the package module: one state, one cache
