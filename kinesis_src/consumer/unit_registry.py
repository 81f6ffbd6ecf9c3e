"""Where the units of an (application, stream) are recorded: on the claims' version item.

A claim and the splits it needs are written in one transaction with ``version + 1``, and one Query
reads claims and units together. An item without ``units`` means one unit, the whole space."""

from __future__ import annotations

from typing import Any, Mapping

from lineage import KeyRange

from ..leases.schema.consumer_items import SPLITS, UNITS, VERSION
from ..leases.schema.keys import HASH_KEY
from .units import Split, UnitMap


def encode(units: UnitMap) -> dict[str, Any]:
    """The attribute values of ``units`` (for an UpdateExpression's ``:units`` and ``:splits``)."""
    return {
        ":units": {"L": [{"S": str(u)} for u in units.units]},
        ":splits": {"L": [
            {"M": {"unit": {"S": str(s.unit)}, "pieces": {"L": [{"S": str(p)} for p in s.pieces]},
                   "claimer": {"S": s.claimer}}}
            for s in units.splits
        ]},
    }


def decode(item: Mapping[str, Any] | None) -> UnitMap:
    """The unit map stored on a version item (the whole space when none is stored)."""
    if item is None or UNITS not in item:
        return UnitMap()
    units = tuple(_range(v["S"]) for v in item[UNITS]["L"])
    splits = tuple(
        Split(_range(m["M"]["unit"]["S"]), tuple(_range(p["S"]) for p in m["M"]["pieces"]["L"]),
              m["M"]["claimer"]["S"])
        for m in item.get(SPLITS, {"L": []})["L"]
    )
    return UnitMap(units, splits)


def version_update(table_name: str, key: Mapping[str, Any], version: int, units: UnitMap) -> dict[str, Any]:
    """A TransactWriteItems Update: ``version + 1`` and ``units``, conditional on ``version`` as read."""
    values: dict[str, Any] = {":next": {"N": str(version + 1)}, **encode(units)}
    names = {"#v": VERSION, "#u": UNITS, "#s": SPLITS}
    if version:
        condition = "#v = :cur"
        values[":cur"] = {"N": str(version)}
    else:
        condition = "attribute_not_exists(#pk)"
        names["#pk"] = HASH_KEY
    return {
        "Update": {
            "TableName": table_name, "Key": dict(key), "UpdateExpression": "SET #v = :next, #u = :units, #s = :splits",
            "ConditionExpression": condition, "ExpressionAttributeNames": names, "ExpressionAttributeValues": values,
        }
    }


def _range(text: str) -> KeyRange:
    start, end = text.split("-")
    return KeyRange(int(start), int(end))
