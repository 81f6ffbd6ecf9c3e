"""Without the ``rich`` extra: the CLI prints plain aligned tables and progress is plain lines, never an ImportError.

``rich`` is made unimportable by putting None in ``sys.modules`` for it and
every submodule already loaded (what Python does for a module it must not
import), so each test sees an environment where ``pip install kinesis-src``
did not bring rich. One check runs in a fresh interpreter with an import hook
that refuses rich, for the imports this process made long ago.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from datetime import datetime, timezone

import pytest
from fake_kinesis import FakeKinesis

from kinesis_src import read_table
from kinesis_src.cli.inspect import lineage_command
from kinesis_src.cli.output import Screen, plain_table
from kinesis_src.errors import ConfigurationError
from kinesis_src.record_progress import record_progress

HEADERS = ["shard", "state", "records"]
ROWS = [["shardId-000000000000", "closed", "11"], ["├─ shardId-000000000002", "open", "1,204"]]


class Terminal(io.StringIO):
    """A text stream that says it is a terminal, as stdout or stderr in an interactive shell."""

    def isatty(self) -> bool:
        return True


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def block_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in {"rich", *(m for m in sys.modules if m.startswith("rich."))}:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError):
        import rich.table  # noqa: F401  (the environment under test really has no rich)


@pytest.fixture
def no_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    block_rich(monkeypatch)


def reshared_fake() -> FakeKinesis:
    """Shard 0 splits into 2 and 3; records of 10 B before and after."""
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.put_records("s", [(f"k{i}", b"x" * 10) for i in range(20)])
    fake.split_shard("s", "shardId-000000000000", 2**126)
    fake.put_records("s", [(f"k{i}", b"y" * 10) for i in range(20)])
    return fake


def lineage(fake: FakeKinesis, out: io.StringIO, **flags) -> str:
    args = argparse.Namespace(stream="s", count=False, json=False, dot=False, svg=None, png=None)
    vars(args).update(flags)
    assert lineage_command(fake, args, out, now=lambda: datetime.fromtimestamp(fake.clock + 60, timezone.utc)) == 0
    return out.getvalue()


def test_a_terminal_without_rich_gets_the_plain_aligned_table(no_rich: None) -> None:
    out = Terminal()
    Screen(out).table(HEADERS, ROWS, title="stream s")
    assert out.getvalue() == """\
stream s
shard                    state   records
shardId-000000000000     closed  11
├─ shardId-000000000002  open    1,204
"""


def test_lineage_on_a_terminal_without_rich_prints_the_rows_a_pipe_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain table has every cell the rich one has, and is exactly what a pipe gets."""
    fake = reshared_fake()
    monkeypatch.setenv("COLUMNS", "300")  # rich's width: wide enough that no cell is cut
    drawn = lineage(fake, Terminal(), count=True)
    block_rich(monkeypatch)
    piped = lineage(fake, io.StringIO(), count=True)
    assert "┃" in drawn and "┃" not in piped
    missing = [cell for line in piped.splitlines()[1:] for cell in line.split("  ") if cell.strip() not in drawn]
    assert not missing, drawn
    stderr = Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    on_terminal = lineage(fake, Terminal(), count=True)
    assert on_terminal == piped
    assert "shardId-000000000003" in on_terminal and len(on_terminal.splitlines()) == 1 + 1 + 4
    assert stderr.getvalue().splitlines()[-1].startswith("s: 40 rec, 0:00:")  # the count's last line


def test_json_output_is_the_same_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = reshared_fake()
    with_rich = lineage(fake, Terminal(), json=True)
    block_rich(monkeypatch)
    assert lineage(fake, Terminal(), json=True) == with_rich
    shards = [shard["shardId"] for shard in json.loads(with_rich)["shards"]]
    assert shards == [f"shardId-00000000000{i}" for i in (0, 2, 3, 1)]


def test_asking_for_a_rich_table_without_rich_names_the_extra(no_rich: None) -> None:
    with pytest.raises(ConfigurationError, match=r"needs rich.*pip install 'kinesis-src\[rich\]'"):
        Screen(io.StringIO(), rich=True).table(HEADERS, ROWS)
    from kinesis_src.record_progress import RICH_EXTRA

    assert RICH_EXTRA == "pip install 'kinesis-src[rich]'"


def test_progress_without_rich_is_a_plain_line_every_few_seconds_and_a_last_one(
    no_rich: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    stderr, clock = Terminal(), Clock()
    monkeypatch.setattr(sys, "stderr", stderr)
    with record_progress("orders", clock=clock, every_s=5.0) as bar:
        bar.add(1000)
        bar.note("1 shard done")  # under 5 s: nothing yet
        clock.now += 5.0
        bar.add(234)
        clock.now += 1.0
        bar.add(1)
        clock.now += 61.5
    assert stderr.getvalue().splitlines() == [
        "orders: 1,234 rec, 0:00:05, 1 shard done",
        "orders: 1,235 rec, 0:01:07, 1 shard done",
    ]


def test_progress_off_a_terminal_prints_nothing_unless_asked(no_rich: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    with record_progress("orders") as bar:
        bar.add(5)
    assert stderr.getvalue() == ""
    with record_progress("orders", True) as bar:
        bar.add(5)
    assert stderr.getvalue().startswith("orders: 5 rec, 0:00:00")


def test_read_table_with_progress_without_rich_reads_and_counts(no_rich: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    table = read_table("s", kinesis=reshared_fake(), progress=True)  # type: ignore[arg-type]
    assert table.num_rows == 40
    assert stderr.getvalue().splitlines()[-1].startswith("s: 40 rec, 0:00:")


def test_a_fresh_interpreter_without_rich_runs_the_cli_and_progress() -> None:
    """Nothing imports rich at module level: an environment without it imports and uses every path."""
    script = """
import io, sys
class NoRich:
    def find_spec(self, name, path=None, target=None):
        if name == "rich" or name.startswith("rich."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoRich())
import kinesis_src.cli, kinesis_src.cli.app, kinesis_src.window
from kinesis_src.cli.output import Screen
from kinesis_src.record_progress import record_progress
class Terminal(io.StringIO):
    def isatty(self):
        return True
out = Terminal()
Screen(out).table(["a", "bb"], [["1", "2"]])
with record_progress("s", True) as bar:
    bar.add(3)
print(out.getvalue(), end="")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a  bb\n1  2\n"
    assert done.stderr.startswith("s: 3 rec, 0:00:00")
