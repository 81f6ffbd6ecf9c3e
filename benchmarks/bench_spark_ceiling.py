"""The Spark source against the no-I/O data-source ceiling (issue #12, target 1), in one run.

Run inside the isolated namespace (it starts DynamoDB Local for the streaming
read's lease table, and the replay endpoint)::

    .venv/bin/python localstack/launcher.py isolated -- .venv/bin/python benchmarks/bench_spark_ceiling.py

One local[2] SparkSession, one replay endpoint (``benchmarks/replay_endpoint.py``,
server in its own process: 4 shards x 100,000 records of 200 B by default),
Spark's no-op sink, six readers interleaved round by round:

- **batch ceiling**: a Python data source defined here, with the same schema
  and the same partitioning (one partition per shard), yielding pre-built
  Arrow batches of the GetRecords page size (10,000 rows): what Spark's
  Python data source API and the noop sink cost with no I/O and no decoding;
- **batch**: ``spark.read.format("kinesis")`` of the whole stream,
  ``fetchIntervalMs=0``;
- **batch, json decode**: the same, the tasks decoding GetRecords bodies
  with ``json.loads`` and ``a2b_base64`` per record instead of msgspec
  (:mod:`kinesis_src.aws.body_decode`): a source defined here that swaps the
  decode in for its read (``--no-reference`` leaves it out);
- **batch, REV** and **streaming, REV** (``--before REV``): the same reads
  with git revision REV's source in the same session: REV's ``kinesis_src``
  exported to a temporary directory as the package ``kinesis_src_before``
  (every ``kinesis_src`` name in it renamed), put on the driver's and the
  workers' path, and registered as ``format("kinesis_before")``: before and
  after are rows of one run;
- **streaming ceiling**: the same source as a stream reader (one
  micro-batch of the same pages), ``trigger(availableNow=True)``;
- **streaming**: ``spark.readStream.format("kinesis")`` from TRIM_HORIZON,
  ``fetchIntervalMs=0``, ``maxRecordsPerShard`` 1,000,000 (``--max-records-per-shard``:
  the default 100,000 would end the first micro-batch exactly at each shard's
  last record, not known to be the last, and cost a second, empty micro-batch),
  ``trigger(availableNow=True)``, a fresh checkpoint
  and application name per round (its lease table on DynamoDB Local is
  created in the warm-up round).

Streaming runs are timed from ``start()`` to the end of
``awaitTermination()``, so query start-up counts (Spark starts a fresh
driver-side Python process per streaming query). A warm-up round of each
(Python workers start, the lease table is created) is not counted; then the
median of ``--rounds`` rounds of each. Printed: rec/s and the ratio to the
ceiling of the same mode; the CPU seconds per record of the Spark process
tree (JVM, Python workers, a streaming query's driver-side Python process),
a figure the other jobs on a shared machine disturb less than wall time; and
the endpoint's own CPU (from its ``/stats``), to show it is not the bound.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "localstack"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import launcher
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from replay_endpoint import ReplayEndpoint

from kinesis_src.spark import KinesisDataSource
from kinesis_src.spark.rows import SCHEMA_DDL

PAGE_ROWS = 10_000  # a full GetRecords page: what the Kinesis source yields per batch
LEASE_TABLE = "bench-spark-ceiling"


class CeilingPartition(InputPartition):
    def __init__(self, index: int, rows: int, size: int) -> None:
        super().__init__(index)
        self.index = index
        self.rows = rows
        self.size = size


class CeilingReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.shards = int(options["shards"])
        self.rows = int(options["rows"])
        self.size = int(options["size"])

    def partitions(self) -> list[InputPartition]:
        return [CeilingPartition(i, self.rows, self.size) for i in range(self.shards)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, CeilingPartition)
        page = ceiling_page(partition.index, partition.size)
        full, rest = divmod(partition.rows, PAGE_ROWS)
        for _ in range(full):
            yield page
        if rest:
            yield page.slice(0, rest)


def ceiling_page(shard: int, size: int) -> Any:
    """One page of the source's schema, values shaped like the replay endpoint's (built once per task)."""
    import pyarrow as pa

    from kinesis_src.arrow import ARROW_SCHEMA

    shard_id = f"shardId-{shard:012d}"
    first = 49_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000 + shard * 10**40
    rows = range(PAGE_ROWS)
    data = [(f"{shard_id}/{i:09d}/".encode() + b"x" * size)[:size] for i in rows]
    now_us = int(time.time() * 1_000_000)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([f"key-{shard}-{i % 64}" for i in rows], pa.string()),
            pa.array(data, pa.binary()),
            pa.array(["replay"] * PAGE_ROWS, pa.string()),
            pa.array([shard_id] * PAGE_ROWS, pa.string()),
            pa.array([str(first + 7 * i) for i in rows], pa.string()),
            pa.array([0] * PAGE_ROWS, pa.int64()),
            pa.array([now_us - PAGE_ROWS + i for i in rows], pa.timestamp("us", tz="UTC")),
        ],
        schema=ARROW_SCHEMA,
    )


class CeilingStreamReader(DataSourceStreamReader):
    """The same pages as a stream that holds ``shards x rows`` records: one micro-batch reads them all."""

    def __init__(self, options: dict[str, str]) -> None:
        self.batch = CeilingReader(options)

    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return {"rows": self.batch.rows}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [] if start == end else self.batch.partitions()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return self.batch.read(partition)

    def commit(self, end: dict[str, int]) -> None:
        pass


def json_decode(body: bytes) -> Any:
    """A GetRecords body through ``json.loads`` and ``a2b_base64`` per record, for the side-by-side row."""
    import binascii
    import json
    from operator import itemgetter

    from kinesis_src.records import RecordPage

    doc = json.loads(body)
    records = doc.get("Records") or []

    def column(key: str) -> list[Any]:
        return [r.get(key) for r in records]

    return RecordPage(
        partition_keys=column("PartitionKey"), data=list(map(binascii.a2b_base64, map(itemgetter("Data"), records))),
        sequence_numbers=column("SequenceNumber"), arrival_epoch=column("ApproximateArrivalTimestamp"),
        encryption_types=column("EncryptionType"), next_iterator=doc.get("NextShardIterator"),
        millis_behind_latest=doc.get("MillisBehindLatest"),
    )


class JsonDecodeReader(DataSourceReader):
    """The Kinesis batch reader, its tasks decoding GetRecords with ``json`` + ``binascii`` (restored after)."""

    def __init__(self, inner: DataSourceReader) -> None:
        self.inner = inner

    def partitions(self) -> Any:
        return self.inner.partitions()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from kinesis_src.aws import decode

        msgspec_decode = decode.decode_get_records
        decode.decode_get_records = json_decode  # the parser hook looks the name up per body
        try:
            yield from self.inner.read(partition)
        finally:  # the worker's cached client serves format("kinesis") tasks next
            decode.decode_get_records = msgspec_decode


class JsonDecodeSource(KinesisDataSource):
    """format("kinesis") with the ``json`` + ``binascii`` decode: the side-by-side row."""

    @classmethod
    def name(cls) -> str:
        return "kinesis_json_decode"

    def reader(self, schema: Any) -> DataSourceReader:
        return JsonDecodeReader(super().reader(schema))


class CeilingSource(DataSource):
    """The no-I/O ceiling: pre-built Arrow batches of kinesis-src's schema, one partition per shard."""

    @classmethod
    def name(cls) -> str:
        return "kinesis_ceiling"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return CeilingReader(self.options)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CeilingStreamReader(self.options)


def before_package(rev: str) -> Path:
    """Revision ``rev``'s ``kinesis_src`` as the package ``kinesis_src_before`` in a new directory, on this
    process's path and (through PYTHONPATH, before Spark starts) its Python workers'."""
    import atexit
    import re
    import shutil
    import subprocess

    tree = Path(tempfile.mkdtemp(prefix="bench-spark-before-"))
    atexit.register(shutil.rmtree, tree, True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "kinesis_src"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    package = tree / "kinesis_src"
    for path in package.rglob("*.py"):
        path.write_text(re.sub(r"\bkinesis_src\b", "kinesis_src_before", path.read_text()))
    package.rename(tree / "kinesis_src_before")
    sys.path.insert(0, str(tree))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    return tree


def before_source() -> type:
    """format("kinesis_before"): the Kinesis source of the exported revision."""
    from kinesis_src_before.spark import KinesisDataSource as Before  # type: ignore[import-not-found]

    class BeforeSource(Before):  # type: ignore[misc, valid-type]
        @classmethod
        def name(cls) -> str:
            return "kinesis_before"

    return BeforeSource


def spark_session(before: bool = False) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]").appName("kinesis-src ceiling bench")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        # a fresh Python worker (the streaming sources' driver side) has 15 s by default to connect back;
        # on a shared machine at load 10+ its imports alone take longer, and the query fails
        .config("spark.python.authenticate.socketTimeout", "120s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KinesisDataSource)
    spark.dataSource.register(CeilingSource)
    spark.dataSource.register(JsonDecodeSource)
    if before:
        spark.dataSource.register(before_source())
    return spark


class Bench:
    """The three readers against one endpoint and one session; each method returns seconds."""

    def __init__(
        self, spark: Any, ep: ReplayEndpoint, dynamodb: str, shards: int, rows: int, size: int, max_records_per_shard: int
    ) -> None:
        self.spark, self.ep, self.dynamodb = spark, ep, dynamodb
        self.shards, self.rows, self.size = shards, rows, size
        self.max_records_per_shard = max_records_per_shard
        self.micro_batches: dict[str, int] = {}
        self.workdir = tempfile.mkdtemp(prefix="bench-spark-ceiling-")

    @property
    def total(self) -> int:
        return self.shards * self.rows

    def ceiling_options(self, reader: Any) -> Any:
        return (
            reader.format("kinesis_ceiling").option("shards", str(self.shards))
            .option("rows", str(self.rows)).option("size", str(self.size))
        )

    def ceiling(self) -> float:
        df = self.ceiling_options(self.spark.read).load()
        return timed(lambda: df.write.format("noop").mode("overwrite").save())

    def ceiling_streaming(self) -> float:
        return self.run_stream(self.ceiling_options(self.spark.readStream).load(), f"ceiling-{uuid.uuid4().hex[:8]}")

    def kinesis_options(self, reader: Any, source: str = "kinesis") -> Any:
        return (
            reader.format(source).option("streamName", self.ep.stream_name)
            .option("endpointUrl", self.ep.endpoint_url).option("region", "us-east-1")
            .option("initialPosition", "trim_horizon").option("fetchIntervalMs", "0")
        )

    def batch(self) -> float:
        df = self.kinesis_options(self.spark.read).load()
        return timed(lambda: df.write.format("noop").mode("overwrite").save())

    def batch_before(self) -> float:
        df = self.kinesis_options(self.spark.read, "kinesis_before").load()
        return timed(lambda: df.write.format("noop").mode("overwrite").save())

    def streaming_before(self) -> float:
        app = f"before-{uuid.uuid4().hex[:8]}"
        df = (
            self.kinesis_options(self.spark.readStream, "kinesis_before").option("dynamodbEndpointUrl", self.dynamodb)
            .option("applicationName", app).option("leaseTableName", f"{LEASE_TABLE}-before")
            .option("maxRecordsPerShard", str(self.max_records_per_shard)).load()
        )
        return self.run_stream(df, app)

    def batch_json(self) -> float:
        df = self.kinesis_options(self.spark.read, "kinesis_json_decode").load()
        return timed(lambda: df.write.format("noop").mode("overwrite").save())

    def streaming(self) -> float:
        app = f"kinesis-{uuid.uuid4().hex[:8]}"
        df = (
            self.kinesis_options(self.spark.readStream).option("dynamodbEndpointUrl", self.dynamodb)
            .option("applicationName", app).option("leaseTableName", LEASE_TABLE)
            .option("maxRecordsPerShard", str(self.max_records_per_shard)).load()
        )
        return self.run_stream(df, app)

    def run_stream(self, df: Any, app: str) -> float:
        """availableNow into the noop sink, timed from start() to the end of awaitTermination()."""
        t0 = time.perf_counter()
        query = (
            df.writeStream.format("noop").trigger(availableNow=True)
            .option("checkpointLocation", os.path.join(self.workdir, app)).start()
        )
        query.awaitTermination()
        seconds = time.perf_counter() - t0
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        if rows != self.total:
            raise RuntimeError(f"streaming read delivered {rows} rows, expected {self.total}")
        self.micro_batches[app.split("-")[0]] = len(query.recentProgress)
        return seconds

    def check_batch_count(self) -> None:
        rows = self.kinesis_options(self.spark.read).load().count()
        if rows != self.total:
            raise RuntimeError(f"batch read counted {rows} rows, expected {self.total}")


def tree_cpu_s(root: int) -> tuple[float, float]:
    """CPU seconds of ``root`` itself, and of every descendant (live, plus the reaped children each waited for).

    The Spark JVM is the root: its Python workers (the pyspark daemon's
    children) and a streaming query's driver-side Python process are below it.
    """
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry))
    own = sum(int(x) for x in stats[root][11:13])  # utime stime
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += sum(int(x) for x in stats[pid][11:15])  # utime stime cutime cstime
        todo.extend(children.get(pid, []))
    return own / tick, (total - own) / tick


def timed(action: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def run(bench: Bench, rounds: int, reference: bool, before: bool) -> None:
    readers = {
        "ceiling": bench.ceiling, "batch": bench.batch,
        "ceiling_streaming": bench.ceiling_streaming, "streaming": bench.streaming,
    }
    if reference:
        readers = {"batch_json": bench.batch_json, **readers}
    if before:
        readers.update(batch_before=bench.batch_before, streaming_before=bench.streaming_before)
    print("warm-up (not counted): ", end="", flush=True)
    for name, measure in readers.items():
        print(f"{name} {measure():.2f} s  ", end="", flush=True)
    bench.check_batch_count()
    print(f"(batch count checked: {bench.total:,} rows; micro-batches per streaming run: {bench.micro_batches})",
          flush=True)
    jvm = bench.spark.sparkContext._gateway.proc.pid
    seconds: dict[str, list[float]] = {name: [] for name in readers}
    spark_cpu: dict[str, list[float]] = {name: [] for name in readers}
    python_cpu: dict[str, list[float]] = {name: [] for name in readers}
    server_cpu: dict[str, list[float]] = {name: [] for name in readers}
    for i in range(rounds):
        line = []
        for name, measure in readers.items():
            before, (jvm0, py0) = bench.ep.stats()["cpu_s"], tree_cpu_s(jvm)
            took = measure()
            jvm1, py1 = tree_cpu_s(jvm)
            spark_cpu[name].append(jvm1 + py1 - jvm0 - py0)
            python_cpu[name].append(py1 - py0)
            server_cpu[name].append(bench.ep.stats()["cpu_s"] - before)
            seconds[name].append(took)
            line.append(f"{name} {bench.total / took:,.0f}")
        print(f"round {i + 1}: " + ", ".join(line) + f" rec/s (load average {os.getloadavg()[0]:.1f})", flush=True)
    report(bench.total, seconds, spark_cpu, python_cpu, server_cpu)


def report(
    total: int,
    seconds: dict[str, list[float]],
    spark_cpu: dict[str, list[float]],
    python_cpu: dict[str, list[float]],
    server_cpu: dict[str, list[float]],
) -> None:
    print(
        f"\n{'reader':<38}{'median s':>9}{'rec/s':>10}{'range rec/s':>18}{'x ceiling':>10}"
        f"{'Spark CPU us/rec':>17}{'x ceiling':>10}{'of it Python':>13}{'server CPU s':>13}"
    )
    labels = {
        "ceiling": "batch ceiling: pre-built Arrow",
        "batch": 'spark.read.format("kinesis")',
        "batch_json": "  the same, json + binascii decode",
        "batch_before": "  the same, --before revision",
        "streaming_before": "  the same, --before revision",
        "ceiling_streaming": "streaming ceiling: pre-built Arrow",
        "streaming": 'readStream.format("kinesis")',
    }
    ceilings = {"ceiling": "ceiling", "batch": "ceiling", "batch_json": "ceiling", "batch_before": "ceiling",
                "streaming_before": "ceiling_streaming",
                "ceiling_streaming": "ceiling_streaming",
                "streaming": "ceiling_streaming"}
    order = [n for n in ("ceiling", "batch", "batch_json", "batch_before", "ceiling_streaming", "streaming",
                              "streaming_before") if n in seconds]
    for name in order:
        took = seconds[name]
        rate = total / statistics.median(took)
        lo, hi = total / max(took), total / min(took)
        cpu = statistics.median(spark_cpu[name])
        ceiling = ceilings[name]
        print(
            f"{labels[name]:<38}{statistics.median(took):>9.2f}{rate:>10,.0f}{f'{lo:,.0f}-{hi:,.0f}':>18}"
            f"{statistics.median(seconds[ceiling]) / statistics.median(took):>9.2f}x{cpu * 1e6 / total:>17.2f}"
            f"{cpu / statistics.median(spark_cpu[ceiling]):>9.2f}x"
            f"{statistics.median(python_cpu[name]) * 1e6 / total:>13.2f}{statistics.median(server_cpu[name]):>13.2f}"
        )
    batch_ceiling = statistics.median(seconds["ceiling"])
    print(
        f"streaming vs the batch ceiling: {batch_ceiling / statistics.median(seconds['streaming']):.2f}x "
        f"(streaming ceiling {batch_ceiling / statistics.median(seconds['ceiling_streaming']):.2f}x)"
    )
    print("(ratios against the ceiling of the same mode; Spark CPU: the Spark JVM, its Python workers and a "
          "streaming query's driver-side Python process; 'of it Python': all but the JVM)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--records-per-shard", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--max-records-per-shard", type=int, default=1_000_000,
        help="the streaming read's maxRecordsPerShard; its default, 100,000, ends the first micro-batch exactly "
        "at each shard's last record (not known to be the last), so availableNow runs a second, empty one",
    )
    parser.add_argument("--no-reference", action="store_true", help="leave out the batch read with the json decode")
    parser.add_argument("--before", metavar="REV", help="also read with git revision REV's source, in the same run")
    opts = parser.parse_args()
    if opts.before:
        print(f"--before: {opts.before}'s kinesis_src as kinesis_src_before in {before_package(opts.before)}")
    with launcher.Emulators(kinesis=False, dynamodb=True) as emulators:
        os.environ.update(emulators.env())
        t0 = time.perf_counter()
        with ReplayEndpoint(shards=opts.shards, records_per_shard=opts.records_per_shard, size=opts.size,
                            mode="process") as ep:
            print(f"replay endpoint: {opts.shards} shards x {opts.records_per_shard:,} records x {opts.size} B, "
                  f"ready in {time.perf_counter() - t0:.1f} s; local[2], noop sink, {opts.rounds} rounds",
                  flush=True)
            spark = spark_session(before=bool(opts.before))
            try:
                bench = Bench(spark, ep, emulators.dynamodb_endpoint, opts.shards, opts.records_per_shard, opts.size,
                              opts.max_records_per_shard)
                run(bench, opts.rounds, reference=not opts.no_reference, before=bool(opts.before))
            finally:
                spark.stop()


if __name__ == "__main__":
    main()
