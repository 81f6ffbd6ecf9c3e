"""Side-by-side benchmark of kinesis-src's Consumer and the libraries users would otherwise run.

Peers: AWS KCL 3 (the MultiLangDaemon from kclpy-ext's bundled jars, with a
Python record processor), kcl-rs, async-kinesis, native-aws-kcl-py; each in
its own venv (requirements.txt, ``--setup``). Every workload runs every peer
on the same emulators in the same run, one peer at a time, and docs/peers.md
is regenerated from the results. Run inside the private network namespace::

    .venv/bin/python benchmarks/peers/run.py --setup          # once, needs the package index
    .venv/bin/python localstack/launcher.py isolated -- .venv/bin/python benchmarks/peers/run.py

Workloads (``--workloads``, default all): ``listing`` (kinesis-mock's ListShards through a
split and a merge, judged as KCL judges it: listing_probe.py), ``startup`` (kinesis-mock, a full
4-shard stream), ``speed`` (the replay endpoint, 4 and 32 shards), ``steady``
(latency and DynamoDB requests at 50 records/s: steady.py), ``scale`` (a worker
stopped with SIGTERM and one added under load: scale.py),
``torture`` (kinesis-mock: 3 workers, splits and merges while producing, a
SIGKILL, a late joiner; see torture.py). Results are kept per workload in
benchmarks/peers/out/results.json, so one workload can be re-run alone and
the document still shows the others (each with its own date).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (HERE, ROOT / "benchmarks", ROOT / "localstack", ROOT):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import report  # noqa: E402
from measure import run_single  # noqa: E402
from peers import PEERS, Peer, setup  # noqa: E402
from scenario import kinesis_client  # noqa: E402

RESULTS = HERE / "out" / "results.json"
OURS = "kinesis-src"
UNPACED = "kinesis-src, 2 MB/s/shard pacing off"
DOC = ROOT / "docs" / "peers.md"
WORKLOADS = ("listing", "startup", "speed", "steady", "scale", "torture")


def log(message: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {message}", flush=True)


def startup(peers: list[Peer], emulators, opts: argparse.Namespace) -> dict:  # noqa: ANN001
    """Each peer alone on a fresh 4-shard kinesis-mock stream preloaded with keyed-counter records."""
    from kinesis_src.testing.producer import KeyedProducer

    kinesis = kinesis_client(emulators.kinesis_endpoint)
    rows = {}
    for peer in peers:
        stream = f"startup-{uuid.uuid4().hex[:6]}"
        kinesis.create_stream(stream, 4)
        kinesis.wait_active(stream)
        producer = KeyedProducer(kinesis, stream, keys=200)
        producer.put_rounds(opts.startup_records // 200)
        log(f"startup: {peer.name} on {stream}")
        result = run_single(peer, stream=stream, kinesis=emulators.kinesis_endpoint,
                            dynamodb=emulators.dynamodb_endpoint, expect=producer.acknowledged,
                            give_up_s=opts.give_up_s, app=f"startup-{uuid.uuid4().hex[:6]}", keep=opts.keep)
        log(f"  {result}")
        rows[peer.name] = result.as_dict()
    return {"shards": 4, "records": opts.startup_records, "server": "kinesis-mock", "results": rows}


def speed(peers: list[Peer], emulators, opts: argparse.Namespace) -> dict:  # noqa: ANN001
    """Each peer alone on the replay endpoint, 4 and 32 shards; the endpoint runs in its own process."""
    from replay_endpoint import ReplayEndpoint

    out = {}
    for shards, per_shard in ((4, opts.records_4), (32, opts.records_32)):
        rows = {}
        with ReplayEndpoint(shards=shards, records_per_shard=per_shard, size=opts.size) as endpoint:
            for peer in peers:
                if peer.replay_note:
                    rows[peer.name] = {"peer": peer.name, "note": peer.replay_note, "finished": False}
                    continue
                log(f"speed: {peer.name}, {shards} shards x {per_shard}")
                result = run_single(peer, stream=endpoint.stream_name, kinesis=endpoint.endpoint_url,
                                    dynamodb=emulators.dynamodb_endpoint, expect=shards * per_shard,
                                    give_up_s=opts.give_up_s, app=f"speed-{uuid.uuid4().hex[:6]}", keep=opts.keep)
                log(f"  {result}")
                rows[peer.name] = result.as_dict()
            if OURS in {p.name for p in peers}:
                log(f"speed: {OURS} without 2 MB/s/shard pacing, {shards} shards x {per_shard}")
                result = run_single(PEERS[OURS], stream=endpoint.stream_name, kinesis=endpoint.endpoint_url,
                                    dynamodb=emulators.dynamodb_endpoint, expect=shards * per_shard,
                                    give_up_s=opts.give_up_s, app=f"speed-{uuid.uuid4().hex[:6]}", keep=opts.keep,
                                    env={"PEERS_NO_BYTE_PACING": "1"})
                log(f"  {result}")
                rows[UNPACED] = result.as_dict()
        out[str(shards)] = {"shards": shards, "records_per_shard": per_shard, "size": opts.size, "results": rows}
    return out


def listing(peers: list[Peer], emulators, opts: argparse.Namespace) -> dict:  # noqa: ANN001, ARG001
    """kinesis-mock's ListShards during and after a split and a merge, judged as KCL judges it."""
    import subprocess

    import listing_probe

    out = {"kinesis-mock": listing_probe.run(emulators.kinesis_endpoint)}
    argv = [sys.executable, str(ROOT / "localstack" / "localstack_host.py"), "run", "--",
            sys.executable, str(HERE / "listing_probe.py")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    if done.returncode == 0:
        out["LocalStack"] = json.loads(done.stdout)
    else:
        out["LocalStack"] = {"note": f"LocalStack did not run (exit {done.returncode}): "
                                     f"{done.stderr.strip().splitlines()[-1:] }"}
    return out


def torture_workload(peers: list[Peer], emulators, opts: argparse.Namespace) -> dict:  # noqa: ANN001
    import torture

    return torture.run_all(peers, emulators, opts, log)


def steady_workload(peers: list[Peer], emulators, opts: argparse.Namespace) -> dict:  # noqa: ANN001
    import steady

    return steady.run_all(peers, emulators, opts, log)


def scale_workload(peers: list[Peer], emulators, opts: argparse.Namespace) -> dict:  # noqa: ANN001
    import scale

    return scale.run_all(peers, emulators, opts, log)


RUNNERS = {"scale": scale_workload, "startup": startup, "speed": speed, "torture": torture_workload, "listing": listing,
           "steady": steady_workload}


def environment(peers: list[Peer], emulators) -> dict:  # noqa: ANN001
    return {
        "versions": {p.name: p.version() for p in PEERS.values()},
        "python": platform.python_version(),
        "java": os.popen("java -version 2>&1 | head -1").read().strip(),
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        "emulators": {name: s.spec.endpoint.rsplit(":", 1)[0] for name, s in emulators.servers.items()},
    }


def deep_merge(old: dict, new: dict) -> dict:
    """``new`` over ``old``: re-running some peers keeps the other peers' rows, and a peer that ran gets
    this run's entry whole (nothing of its earlier run survives, e.g. a torture mode it no longer needed)."""
    out = dict(old)
    for key, value in new.items():
        if key == "results" and isinstance(value, dict) and isinstance(old.get(key), dict):
            out[key] = {**old[key], **value}
        else:
            out[key] = value
    return out


def load() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="create the peers' venvs and exit")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated column titles")
    parser.add_argument("--render-only", action="store_true", help="rewrite docs/peers.md from results.json")
    parser.add_argument("--startup-records", type=int, default=10_000)
    parser.add_argument("--records-4", type=int, default=50_000, help="records per shard, 4-shard speed run")
    parser.add_argument("--records-32", type=int, default=20_000, help="records per shard, 32-shard speed run")
    parser.add_argument("--size", type=int, default=200, help="record size, speed runs")
    parser.add_argument("--give-up-s", type=float, default=420.0, help="per worker run")
    parser.add_argument("--torture-give-up-s", type=float, default=180.0)
    parser.add_argument("--torture-modes", default="plain,after-first-sync,gentle",
                        help="torture.py modes, tried in order until one finishes")
    parser.add_argument("--keep", type=Path, default=None, help="keep delivery logs under this directory")
    opts = parser.parse_args()
    if opts.setup:
        setup()
        return
    results = load()
    if not opts.render_only:
        import launcher

        peers = [PEERS[name] for name in opts.peers.split(",")]
        command = " ".join([".venv/bin/python localstack/launcher.py isolated -- .venv/bin/python benchmarks/peers/run.py",
                            *(f"'{a}'" if " " in a else a for a in sys.argv[1:])])
        with launcher.Emulators() as emulators:
            os.environ.update(emulators.env())
            results["environment"] = environment(peers, emulators)
            for name in opts.workloads.split(","):
                started = dt.datetime.now(dt.timezone.utc)
                section = RUNNERS[name](peers, emulators, opts)
                merged = deep_merge(results.get(name, {}).get("data", {}), section)
                results[name] = {"date": f"{started:%Y-%m-%d %H:%M} UTC", "command": command, "data": merged}
                RESULTS.parent.mkdir(exist_ok=True)
                RESULTS.write_text(json.dumps(results, indent=1, default=str))
                DOC.write_text(report.render(results))  # after each workload: a long run is never lost
    DOC.write_text(report.render(results))
    log(f"wrote {DOC}")


if __name__ == "__main__":
    main()
