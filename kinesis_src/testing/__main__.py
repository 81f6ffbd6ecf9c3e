"""``python -m kinesis_src.testing install | start | run | isolated | toolchain``: the embedded emulators' command line."""

import sys

from .emulators.cli import main

if __name__ == "__main__":
    sys.exit(main())
