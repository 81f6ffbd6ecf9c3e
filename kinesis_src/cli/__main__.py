"""``python -m kinesis_src.cli``: the same as the ``kinesis-src`` command."""

import sys

from .app import main

sys.exit(main())
