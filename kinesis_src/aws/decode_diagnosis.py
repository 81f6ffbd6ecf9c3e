"""What is wrong with a GetRecords body the decoder rejected, named by field, never by content.

Slow and thorough, and run once per rejected body: the decoders
(:mod:`.decode`) take the fast path and come here only to word their
:class:`~kinesis_src.errors.MalformedResponseError`. Record data and
partition keys are the user's data and end up in logs with the error, so a
problem names the field, its index and its kind only.
"""

from __future__ import annotations

import binascii
import json


def diagnose(body: bytes | str) -> str | None:
    """The first problem in ``body`` as "field problem", or None if none is found."""
    try:
        doc = json.loads(body)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        return f"not JSON ({json_problem(exc)})"
    if not isinstance(doc, dict):
        return f"top level is a JSON {kind(doc)}, not an object"
    return _records_problem(doc.get("Records")) or _children_problem(doc.get("ChildShards"))


def json_problem(exc: ValueError) -> str:
    """Position and reason only: JSONDecodeError.doc and UnicodeDecodeError.object hold the body."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg}: character {exc.pos} of {len(exc.doc)}"
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid {exc.encoding} at byte {exc.start}"
    return type(exc).__name__


def kind(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _records_problem(records: object) -> str | None:
    if not records:
        return None
    if not isinstance(records, list):
        return f"'Records' is a JSON {kind(records)}, not an array"
    for i, record in enumerate(records):
        problem = _record_problem(record)
        if problem:
            return f"Records[{i}]{problem}"
    return None


def _record_problem(record: object) -> str | None:
    if not isinstance(record, dict):
        return f" is a JSON {kind(record)}, not an object"
    for field in ("SequenceNumber", "Data"):
        if field not in record:
            return f".{field} is missing"
    data = record["Data"]
    if not isinstance(data, str):
        return f".Data is a JSON {kind(data)}, not a base64 string"
    if not data.isascii():
        return ".Data is not base64 (non-ASCII characters)"
    try:
        binascii.a2b_base64(data)
    except binascii.Error:
        return ".Data is not valid base64 (bad length or padding)"
    return None


def _children_problem(children: object) -> str | None:
    if not children:
        return None
    if not isinstance(children, list):
        return f"'ChildShards' is a JSON {kind(children)}, not an array"
    for i, child in enumerate(children):
        if not isinstance(child, dict):
            return f"ChildShards[{i}] is a JSON {kind(child)}, not an object"
        for field in ("ShardId", "HashKeyRange"):
            if field not in child:
                return f"ChildShards[{i}].{field} is missing"
        problem = _hash_range_problem(child["HashKeyRange"])
        if problem:
            return f"ChildShards[{i}].HashKeyRange{problem}"
    return None


def _hash_range_problem(hash_range: object) -> str | None:
    if not isinstance(hash_range, dict):
        return f" is a JSON {kind(hash_range)}, not an object"
    for field in ("StartingHashKey", "EndingHashKey"):
        value = hash_range.get(field)
        if value is None:
            return f".{field} is missing"
        if not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
            return f".{field} is not a decimal integer"
    return None
