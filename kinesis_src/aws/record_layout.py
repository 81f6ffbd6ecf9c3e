"""The layout of a GetRecords page's records, read off its first record (for :mod:`.plain_body`).

Services write every record of a page with the same fields in the same
order, but not every service the same order: kinesalite writes
``PartitionKey, Data, ApproximateArrivalTimestamp, SequenceNumber``, the
replay endpoint (benchmarks/) ``SequenceNumber`` first, and AWS may add
``EncryptionType``. So the order is not assumed: the first record's keys are
read (a few Python steps a page), and the :class:`Layout` of that order
says where each record's quotes are and which bytes lie around its values.
:mod:`.plain_body` then holds *every* record to it and refuses the page
otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

NUMBER_FIELDS = frozenset({"ApproximateArrivalTimestamp"})
REQUIRED_FIELDS = frozenset({"SequenceNumber", "Data", "PartitionKey", "ApproximateArrivalTimestamp"})
OPTIONAL_FIELDS = frozenset({"EncryptionType"})
_NUMBER_BYTES = frozenset(b"0123456789.eE+-")


class NotALayout(ValueError):
    """The first record is not of a layout :mod:`.plain_body` reads; the next decoder takes the page."""


@dataclass(frozen=True)
class Layout:
    """Where things are in each record of one field order, counted in the record's quotes."""

    fields: tuple[str, ...]
    quotes: int
    """Quotes a record: two a key, two a string value, none a number."""
    key_quotes: tuple[int, ...]
    """Each field's key: the index of its opening quote among the record's quotes."""
    word_quotes: np.ndarray
    word_offsets: np.ndarray
    word_values: np.ndarray
    """The bytes around the values as 8-byte words: at ``word_offsets`` from quote ``word_quotes``."""

    def is_number(self, field: str) -> bool:
        return field in NUMBER_FIELDS


def first_record_fields(body: bytes, quotes: np.ndarray, first: int) -> tuple[str, ...]:
    """The keys of the record whose first key opens with quote ``quotes[first]``, in order."""
    fields: list[str] = []
    index = first
    while True:
        if index + 1 >= len(quotes) or len(fields) == len(REQUIRED_FIELDS | OPTIONAL_FIELDS):
            raise NotALayout("the first record does not end")
        key_open, key_close = int(quotes[index]), int(quotes[index + 1])
        key = body[key_open + 1 : key_close].decode("ascii")
        if key in fields or key not in REQUIRED_FIELDS | OPTIONAL_FIELDS or body[key_close + 1 : key_close + 2] != b":":
            raise NotALayout("an unknown or repeated field")
        fields.append(key)
        after, index = _after_value(body, quotes, index, key in NUMBER_FIELDS)
        follows = body[after : after + 1]
        if follows == b"}":
            break
        if follows != b",":
            raise NotALayout("a value not followed by ',' or '}'")
    if not REQUIRED_FIELDS <= set(fields):
        raise NotALayout("a field missing")
    return tuple(fields)


def _after_value(body: bytes, quotes: np.ndarray, index: int, number: bool) -> tuple[int, int]:
    """Where the value of the key at quote ``index`` ends, and the quote index of the next key."""
    if number:
        end = int(quotes[index + 1]) + 2
        while end < len(body) and body[end] in _NUMBER_BYTES:
            end += 1
        return end, index + 2
    if index + 3 >= len(quotes):
        raise NotALayout("a string value does not end")
    return int(quotes[index + 3]) + 1, index + 4


@lru_cache(maxsize=64)
def layout(fields: tuple[str, ...]) -> Layout:
    """The :class:`Layout` of records with these fields in this order."""
    quote = 0
    key_quotes: list[int] = []
    word_quotes: list[int] = []
    word_offsets: list[int] = []
    word_values: list[int] = []
    for i, name in enumerate(fields):
        number = name in NUMBER_FIELDS
        key_quotes.append(quote)
        # '{' or ',' before the key (offset -1 from its quote), the key, ':', and a string value's opening quote
        text = (b"," if i else b"{") + b'"' + name.encode() + b'":' + (b"" if number else b'"')
        for start in sorted({*range(0, len(text) - 7, 8), len(text) - 8}):
            word_quotes.append(quote)
            word_offsets.append(start - 1)
            word_values.append(int.from_bytes(text[start : start + 8], "little"))
        quote += 2 if number else 4
    return Layout(
        fields=fields,
        quotes=quote,
        key_quotes=tuple(key_quotes),
        word_quotes=np.array(word_quotes, dtype=np.int64),
        word_offsets=np.array(word_offsets, dtype=np.int64),
        word_values=np.array(word_values, dtype=np.uint64),
    )
