"""The ``kinesis-src`` command (entry point :func:`main`); see :mod:`.app` for the commands."""

from __future__ import annotations

from .app import build_parser, export_format, main

__all__ = ["build_parser", "export_format", "main"]
