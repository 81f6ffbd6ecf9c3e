"""JSON form of a shard graph, for checkpoints.

Shards keep their ListShards shape (one validation path); equal graphs give identical text.
"""


from __future__ import annotations

import json
from typing import Any, Iterable

from lineage.errors import LineageError, LineageFormatError
from lineage.shard import Shard, shard_sort_key

FORMAT_NAME = "kinesis-src/shard-lineage"
FORMAT_VERSION = 1
_KEYS = frozenset({"format", "version", "shards"})


def dumps(shards: Iterable[Shard]) -> str:
    ordered = sorted(shards, key=lambda shard: shard_sort_key(shard.shard_id))
    document = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "shards": [shard.to_listing() for shard in ordered],
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def loads(text: str | bytes) -> list[Shard]:
    """Parse and check a document written by :func:`dumps`."""
    document = _parse(text)
    _check_header(document)
    raw_shards = document["shards"]
    if not isinstance(raw_shards, list):
        raise LineageFormatError(f"lineage JSON: 'shards' must be a list, got {_kind(raw_shards)}")
    return [_shard_at(index, raw) for index, raw in enumerate(raw_shards)]


def _parse(text: str | bytes) -> dict[str, Any]:
    if not isinstance(text, (str, bytes, bytearray)):
        raise LineageFormatError(f"lineage JSON must be str or bytes, got {_kind(text)}")
    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LineageFormatError(f"lineage JSON is not valid JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise LineageFormatError(f"lineage JSON must be an object, got {_kind(document)}")
    return document


def _check_header(document: dict[str, Any]) -> None:
    missing = sorted(_KEYS - document.keys())
    unknown = sorted(document.keys() - _KEYS)
    if missing or unknown:
        raise LineageFormatError(
            f"lineage JSON keys: missing {missing}, unexpected {unknown} "
            f"(expected {sorted(_KEYS)})"
        )
    if document["format"] != FORMAT_NAME:
        raise LineageFormatError(
            f"lineage JSON format is {document['format']!r}, expected {FORMAT_NAME!r}"
        )
    version = document["version"]
    if type(version) is not int or version != FORMAT_VERSION:
        raise LineageFormatError(
            f"lineage JSON version {version!r} is not supported (this code reads {FORMAT_VERSION})"
        )


def _shard_at(index: int, raw: Any) -> Shard:
    try:
        return Shard.from_listing(raw)
    except LineageError as exc:
        raise LineageFormatError(f"lineage JSON shards[{index}]: {exc}") from exc


def _kind(value: Any) -> str:
    return type(value).__name__
