"""DynamoDB attribute values: how the lease table's items write them, and a reader that checks them.

A malformed item raises :class:`~kinesis_src.errors.CorruptLeaseError` naming the table, the
item's key and the attribute (never the item's other values)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ...errors import CorruptLeaseError
from .keys import HASH_KEY, RANGE_KEY

if TYPE_CHECKING:
    from ...aws.dynamodb import Item

_ABSENT = object()
_TYPE_NAMES = {"S": "a string (S)", "N": "a number (N)", "L": "a list (L)", "BOOL": "a boolean (BOOL)"}


def string_value(value: str) -> dict[str, str]:
    return {"S": value}


def number_value(value: int) -> dict[str, str]:
    return {"N": str(value)}


def strings_value(values: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    return {"L": [string_value(v) for v in values]}


@dataclass(frozen=True)
class ItemReader:
    """Typed reads of one table's items; errors name the table, key and attribute."""

    table: str

    def key_part(self, item: Item, attribute: str) -> str:
        return self.string(item, attribute)

    def string(self, item: Item, attribute: str, optional: bool = False) -> str:
        value = self._typed(item, attribute, "S", optional)
        return "" if value is None else value

    def number(self, item: Item, attribute: str) -> int:
        text = self._typed(item, attribute, "N", False)
        try:
            return int(text)
        except (TypeError, ValueError):
            raise self.corrupt(item, attribute, "an integer", f"is {text!r}") from None

    def decimal(self, item: Item, attribute: str) -> float:
        text = self._typed(item, attribute, "N", False)
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise self.corrupt(item, attribute, "a number", f"is {text!r}") from None
        if not value >= 0:  # also NaN
            raise self.corrupt(item, attribute, "a rate >= 0", f"is {text!r}")
        return value

    def strings(self, item: Item, attribute: str) -> tuple[str, ...]:
        values = self._typed(item, attribute, "L", False)
        out = []
        for i, element in enumerate(values):
            if type(element) is dict and len(element) == 1 and type(element.get("S")) is str and element["S"]:
                out.append(element["S"])
                continue
            if not isinstance(element, Mapping) or set(element) != {"S"} or not element["S"]:
                raise self.corrupt(item, attribute, "a list of non-empty strings", f"has element {i} = {element!r}")
            out.append(element["S"])
        return tuple(out)

    def boolean(self, item: Item, attribute: str) -> bool:
        return bool(self._typed(item, attribute, "BOOL", False))

    def _typed(self, item: Item, attribute: str, type_code: str, optional: bool) -> Any:
        """The value of ``attribute`` if of DynamoDB type ``type_code``, else a CorruptLeaseError.
        Runs for every attribute of every lease read: botocore's one-key dict is checked first with
        ``type() is dict``, and ``isinstance`` against ``Mapping`` only for anything else."""
        raw = item.get(attribute)
        if type(raw) is dict and len(raw) == 1:
            value = raw.get(type_code, _ABSENT)
            if value is not _ABSENT:
                return value
        if raw is None:
            if optional:
                return None
            raise self.corrupt(item, attribute, _TYPE_NAMES[type_code], "is missing")
        if not isinstance(raw, Mapping) or len(raw) != 1 or type_code not in raw:
            found = ", ".join(raw) if isinstance(raw, Mapping) else type(raw).__name__
            raise self.corrupt(item, attribute, _TYPE_NAMES[type_code], f"has type {found} (value {_short(raw)})")
        return raw[type_code]

    def corrupt(self, item: Item, attribute: str, expected: str, found: str) -> CorruptLeaseError:
        key = {name: _key_text(item.get(name)) for name in (HASH_KEY, RANGE_KEY)}
        return CorruptLeaseError(self.table, key, attribute, expected, found)


def _key_text(raw: Any) -> str:
    if isinstance(raw, Mapping) and isinstance(raw.get("S"), str):
        return raw["S"]
    return f"<{_short(raw)}>"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
