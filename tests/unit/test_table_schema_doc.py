"""docs/leases.md's key table says what kinesis_src.leases.schema.keys builds.

Every item kind in ``keys.ITEM_KINDS`` is a row of the doc's table with the
same key shape, and every row is a kind; every key builder's output fits
exactly one kind's shape, so the table cannot describe keys nobody builds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kinesis_src.leases.layout import LeaseLayout
from kinesis_src.leases.schema import keys

DOC = Path(__file__).resolve().parents[2] / "docs" / "leases.md"
NAME = "[A-Za-z0-9_.-]+"


def doc_rows() -> list[tuple[str, str]]:
    """(pk, sk) of each row of the table headed ``| pk | sk | item |``."""
    lines = DOC.read_text().splitlines()
    start = lines.index("| pk | sk | item |") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((_code(cells[0]), _code(cells[1])))
    return rows


def _code(cell: str) -> str:
    match = re.fullmatch(r"`([^`]+)`", cell)
    assert match, f"a key cell of docs/leases.md's key table holds one `code` span, not {cell!r}"
    return match.group(1)


def shape_regex(shape: str) -> re.Pattern[str]:
    """``<name>`` is any name, ``[...]`` is optional, the rest is literal."""
    out, i = "", 0
    for match in re.finditer(r"<[^>]+>|\[|\]", shape):
        out += re.escape(shape[i : match.start()])
        token = match.group()
        out += NAME if token.startswith("<") else "(?:" if token == "[" else ")?"
        i = match.end()
    return re.compile(out + re.escape(shape[i:]))


def test_the_doc_table_lists_every_item_kind_and_nothing_else() -> None:
    rows = doc_rows()
    kinds = [(kind.pk, kind.sk) for kind in keys.ITEM_KINDS]
    assert len(set(rows)) == len(rows), "a key shape appears twice in docs/leases.md"
    assert sorted(rows) == sorted(kinds), (
        f"in the doc only: {sorted(set(rows) - set(kinds))}; in keys.ITEM_KINDS only: {sorted(set(kinds) - set(rows))}"
    )


SPREAD = LeaseLayout(keys.lease_partition("app", "orders", "0-99"), partitions=4)
BUILT = [
    keys.lease_key(keys.lease_partition("app", "orders"), "shardId-000000000001"),
    keys.lease_key(SPREAD.partition_of("shardId-000000000001"), "shardId-000000000001"),
    keys.worker_key(keys.lease_partition("app", "orders", "0-99"), "w-1"),
    keys.layout_key("app", "orders"),
    keys.layout_key("app", "orders", "0-99"),
    keys.claim_key("app", "orders"),
    keys.identity_key("app", "orders"),
    keys.lease_key(keys.progress_partition("app", "orders", "run-1", 7), "shardId-000000000001"),
    keys.plan_part_key(keys.plan_partition("app", "orders", "run-1", 7), "0a1b", 2),
    keys.stream_list_key("app"),
    keys.range_claim_key("app", "orders", "w-1"),
    keys.range_version_key("app", "orders"),
    keys.ordering_key("app", "orders"),
]


@pytest.mark.parametrize("key", BUILT, ids=lambda k: f"{k['pk']['S']}|{k['sk']['S']}")
def test_every_built_key_fits_exactly_one_item_kind(key: dict[str, dict[str, str]]) -> None:
    pk, sk = key[keys.HASH_KEY]["S"], key[keys.RANGE_KEY]["S"]
    fits = [k for k in keys.ITEM_KINDS if shape_regex(k.pk).fullmatch(pk) and shape_regex(k.sk).fullmatch(sk)]
    assert len(fits) == 1, f"{pk} / {sk} fits {fits}"


def test_every_item_kind_is_built() -> None:
    built = {(k[keys.HASH_KEY]["S"], k[keys.RANGE_KEY]["S"]) for k in BUILT}
    unbuilt = [kind for kind in keys.ITEM_KINDS
               if not any(shape_regex(kind.pk).fullmatch(pk) and shape_regex(kind.sk).fullmatch(sk) for pk, sk in built)]
    assert unbuilt == []


def test_a_shape_is_not_a_catch_all() -> None:
    lease = shape_regex(next(k.pk for k in keys.ITEM_KINDS if k.holds == "shard lease"))
    assert lease.fullmatch("lease#app#orders/3") and lease.fullmatch("lease#app#orders#0-99/3")
    assert not lease.fullmatch("layout#app#orders") and not lease.fullmatch("lease#app")


PACKAGE = Path(__file__).resolve().parents[2] / "kinesis_src"
KEY_LITERAL = re.compile(r"""["'](lease|layout|claim|stream|progress|plan|streams|ranges|processing|shard|worker)#|["'](pk|sk)["']""")
OUTSIDE_THE_SCHEMA = {
    "aws/dynamodb_results.py": "Query's default range-key name (query_args); aws/ imports nothing above it",
}


def test_no_other_module_spells_a_key_name_or_prefix() -> None:
    spelled = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "schema" not in path.relative_to(PACKAGE).parts and KEY_LITERAL.search(path.read_text())
    }
    assert spelled == set(OUTSIDE_THE_SCHEMA), f"key names or prefixes spelled outside leases/schema/: {sorted(spelled)}"
