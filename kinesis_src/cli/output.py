"""Where a command's result goes: rich tables on a terminal, aligned plain text otherwise, or JSON.

Plain text is the contract scripts and tests read; rich tables show the same cells.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from ..errors import ConfigurationError
from ..record_progress import RICH_EXTRA


class Screen:
    """One command's output stream: ``rich`` None draws rich tables on a terminal if rich is installed."""

    def __init__(self, out: TextIO, rich: bool | None = None, width: int | None = None) -> None:
        self.out = out
        self.rich = _is_terminal(out) if rich is None else rich
        self.rich_required = rich is True  # asked for by name: its absence is an error, not plain text
        self.width = width

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None = None) -> None:
        if self.rich and self._rich_table(headers, rows, title):
            return
        if title:
            self.line(title)
        for text in plain_table(headers, rows):
            self.line(text)

    def json(self, document: Any) -> None:
        self.out.write(json.dumps(document, indent=2) + "\n")

    def _rich_table(self, headers: Sequence[str], rows: Sequence[Sequence[str]], title: str | None) -> bool:
        """Draw the table with rich; False, drawing nothing, when rich is not installed and was not required."""
        try:
            from rich.console import Console
            from rich.table import Table
            from rich.text import Text
        except ImportError as exc:
            if self.rich_required:
                raise ConfigurationError(
                    f"Screen(rich=True) needs rich, which is not installed: {RICH_EXTRA}, "
                    "or leave rich unset to get plain text"
                ) from exc
            return False

        table = Table(title=title, title_justify="left", header_style="bold")
        for name in headers:
            table.add_column(name, no_wrap=True)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))  # Text: a "[...]" in a cell is not markup
        Console(file=self.out, width=self.width, force_terminal=self.rich).print(table)
        return True


def plain_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    lines = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(line[c]) for line in lines) for c in range(len(headers))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False
