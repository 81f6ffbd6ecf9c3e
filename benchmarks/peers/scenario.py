"""What the one-stream peer scenarios (steady.py, scale.py) share: a fresh keyed stream, and the loop over peers.

Each scenario's ``run_one(peer, emulators, kinesis, give_up_s, keep)``
measures one peer on a stream of its own and returns a frozen dataclass;
:func:`each_peer` runs it for every peer, logging each result.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from peers import Peer

KEYS = 50  # partition keys of the producer: a round is one record each


def kinesis_client(endpoint: str):  # noqa: ANN201
    """The project's Kinesis client on the run's endpoint (imported on use: the peers' venvs lack it)."""
    from kinesis_src.aws import KinesisClient
    from kinesis_src.config import AwsSettings

    return KinesisClient(AwsSettings(region="us-east-1", endpoint_url=endpoint))


@dataclass(frozen=True)
class FreshStream:
    """A new ACTIVE stream with one round already put, an application name, and an empty sink directory."""

    stream: str
    app: str
    producer: Any  # kinesis_src.testing.producer.KeyedProducer
    sink: Path


def fresh_stream(kinesis: Any, name: str, shards: int, keep: Path | None) -> FreshStream:
    """Stream and application ``<name>-<random>``; the sink under ``keep`` (or the temporary directory)."""
    from kinesis_src.testing.producer import KeyedProducer

    stream, app = f"{name}-{uuid.uuid4().hex[:6]}", f"{name}-{uuid.uuid4().hex[:6]}"
    kinesis.create_stream(stream, shards)
    kinesis.wait_active(stream)
    producer = KeyedProducer(kinesis, stream, keys=KEYS)
    producer.put_round()
    return FreshStream(stream, app, producer, Path(tempfile.mkdtemp(prefix=f"{name}-", dir=keep)))


def each_peer(name: str, run_one: Callable[..., Any], peers: list[Peer], emulators: Any, opts: Any,
              log: Callable[[str], None]) -> dict[str, dict]:
    """``run_one`` for every peer, one at a time on one Kinesis client; each result as a dict by peer name."""

    kinesis = kinesis_client(emulators.kinesis_endpoint)
    out = {}
    for peer in peers:
        log(f"{name}: {peer.name}")
        result = run_one(peer, emulators, kinesis, opts.give_up_s, opts.keep)
        log(f"  {result}")
        out[peer.name] = asdict(result)
    return out
