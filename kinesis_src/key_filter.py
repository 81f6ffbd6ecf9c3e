"""Keep only a sticky key range's records of a page (see :class:`lineage.KeyRange`).

A filtered page keeps its iterator, lag and child shards: the read goes on as if nothing dropped.
"""


from __future__ import annotations

from dataclasses import replace
from itertools import compress, repeat

from lineage import KeyRange, hash_key_of

from .records import RecordPage


def in_range_mask(page: RecordPage, key_range: KeyRange) -> list[bool]:
    """One bool per row: is its hash key (explicit, else MD5 of the partition key) inside ``key_range``?"""
    keys = ("" if pk is None else pk for pk in page.partition_keys)
    explicit = page.explicit_hash_keys if page.explicit_hash_keys is not None else repeat(None)
    start, end = key_range.start, key_range.end
    return [start <= hash_key_of(pk, ehk) <= end for pk, ehk in zip(keys, explicit)]


def filter_page(page: RecordPage, key_range: KeyRange) -> RecordPage:
    """``page`` with only the rows whose hash key is in ``key_range``; the same object if all are."""
    mask = in_range_mask(page, key_range)
    if all(mask):
        return page

    def keep(column: list | None) -> list | None:
        return None if column is None else list(compress(column, mask))

    return replace(
        page,
        partition_keys=keep(page.partition_keys),
        data=keep(page.data),
        sequence_numbers=keep(page.sequence_numbers),
        arrival_epoch=keep(page.arrival_epoch),
        encryption_types=keep(page.encryption_types),
        sub_sequence_numbers=keep(page.sub_sequence_numbers),
        explicit_hash_keys=keep(page.explicit_hash_keys),
    )
