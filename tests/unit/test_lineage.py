"""Example-based tests for lineage.ShardGraph."""

from __future__ import annotations

import copy
import json

import pytest

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import MAX_HASH_KEY, listing, shard_id
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import MAX_HASH_KEY, listing, shard_id

from lineage import (
    HashRange,
    HashSpaceError,
    LineageConflictError,
    LineageCycleError,
    LineageError,
    LineageFormatError,
    MalformedShardError,
    NoOwnerError,
    ParentConflictError,
    Shard,
    ShardGraph,
    UnknownShardError,
)

S0, S1, S2, S3, S4, S5 = (shard_id(n) for n in range(6))
MID = 2**127


def graph_of(*pages: list[dict]) -> ShardGraph:
    graph = ShardGraph()
    for page in pages:
        graph.update(page)
    return graph


def split_history() -> list[dict]:
    """shard 0 split at MID into 1 and 2."""
    return [
        listing(0, 0, MAX_HASH_KEY, ending="900"),
        listing(1, 0, MID - 1, (0,)),
        listing(2, MID, MAX_HASH_KEY, (0,)),
    ]


def split_merge_history() -> list[dict]:
    """shard 0 split into 1 and 2, then 1 and 2 merged back into 3."""
    return [
        listing(0, 0, MAX_HASH_KEY, ending="900"),
        listing(1, 0, MID - 1, (0,), ending="901"),
        listing(2, MID, MAX_HASH_KEY, (0,), ending="902"),
        listing(3, 0, MAX_HASH_KEY, (1, 2)),
    ]


# ------------------------------------------------------------ lineage basics

def test_single_shard_is_open_root_and_owns_everything() -> None:
    graph = graph_of([listing(0, 0, MAX_HASH_KEY)])
    assert graph.parents(S0) == ()
    assert graph.children(S0) == ()
    assert graph.is_open(S0)
    assert graph.ready(set()) == [S0]
    assert graph.owner(0) == graph.owner(MAX_HASH_KEY) == S0
    graph.validate()


def test_split() -> None:
    graph = graph_of(split_history())
    assert graph.parents(S1) == graph.parents(S2) == (S0,)
    assert graph.children(S0) == (S1, S2)
    assert not graph.is_open(S0)
    assert graph.open_shards() == [S1, S2]
    assert graph.ready(set()) == [S0]
    assert graph.ready({S0}) == [S1, S2]
    graph.validate()


def test_merge_parents_keep_listing_order() -> None:
    graph = graph_of(
        [
            listing(0, 0, MID - 1, ending="900"),
            listing(1, MID, MAX_HASH_KEY, ending="901"),
            listing(2, 0, MAX_HASH_KEY, (1, 0)),
        ]
    )
    assert graph.parents(S2) == (S1, S0)
    assert graph.children(S0) == graph.children(S1) == (S2,)
    assert graph.ready(set()) == [S0, S1]
    assert graph.ready({S0}) == [S1]
    assert graph.ready({S1}) == [S0]
    assert graph.ready({S0, S1}) == [S2]
    assert graph.open_shards() == [S2]


def test_split_then_merge_back() -> None:
    graph = graph_of(split_merge_history())
    assert graph.open_shards() == [S3]
    assert graph.ancestors(S3) == (S0, S1, S2)
    assert graph.descendants(S0) == (S1, S2, S3)
    assert graph.ready({S0, S1}) == [S2]
    assert graph.ready({S0, S1, S2}) == [S3]
    assert graph.ready({S0, S1, S2, S3}) == []
    assert graph.owner(0) == graph.owner(MID) == S3
    graph.validate()


def test_shard_with_children_is_closed_even_without_ending_sequence_number() -> None:
    graph = graph_of([listing(0, 0, MAX_HASH_KEY)])
    changed = graph.update([listing(1, 0, MID - 1, (0,)), listing(2, MID, MAX_HASH_KEY, (0,))])
    assert changed == (S0, S1, S2), "parent closing by child must be reported"
    assert not graph.is_open(S0)
    assert graph.ending_sequence_number(S0) is None
    graph.validate()


def test_closed_shard_never_reopens_on_stale_page() -> None:
    graph = graph_of(split_history())
    assert graph.update([listing(0, 0, MAX_HASH_KEY)]) == ()
    assert not graph.is_open(S0)
    assert graph.ending_sequence_number(S0) == "900"


def test_update_returns_only_new_or_changed_shards() -> None:
    graph = ShardGraph()
    assert graph.update([listing(0, 0, MAX_HASH_KEY)]) == (S0,)
    assert graph.update([listing(0, 0, MAX_HASH_KEY)]) == ()
    assert graph.update([listing(0, 0, MAX_HASH_KEY, ending="900")]) == (S0,)
    assert graph.update([]) == ()


def test_trimmed_parent_child_ready_immediately() -> None:
    graph = graph_of([listing(1, 0, MID - 1, (0,)), listing(2, MID, MAX_HASH_KEY, (0,))])
    assert S0 not in graph
    assert graph.parents(S1) == (S0,)
    assert graph.ready(set()) == [S1, S2]
    assert graph.ancestors(S1) == ()
    graph.validate()


def test_merge_with_one_trimmed_parent_waits_for_the_known_one() -> None:
    graph = graph_of(
        [listing(1, MID, MAX_HASH_KEY, ending="901"), listing(2, 0, MAX_HASH_KEY, (0, 1))]
    )
    assert graph.ready(set()) == [S1]
    assert graph.ready({S1}) == [S2]


def test_drained_may_contain_unknown_ids_and_any_iterable() -> None:
    graph = graph_of(split_history())
    assert graph.ready(["shardId-999999999999", S0]) == [S1, S2]
    assert graph.ready(iter([S0])) == [S1, S2]


def test_ready_rejects_a_single_id_string() -> None:
    with pytest.raises(TypeError, match="collection"):
        graph_of(split_history()).ready(S0)


def test_pages_out_of_order_child_before_parent() -> None:
    history = split_merge_history()
    forward = graph_of(history[:1], history[1:3], history[3:])
    backward = graph_of(history[3:], history[1:3], history[:1])
    assert forward == backward
    assert forward.to_json() == backward.to_json()


def test_child_page_first_makes_child_a_root_until_parent_listed() -> None:
    graph = graph_of([listing(1, 0, MID - 1, (0,))])
    assert graph.ready(set()) == [S1]
    graph.update([listing(0, 0, MAX_HASH_KEY)])
    assert graph.ready(set()) == [S0]
    assert not graph.is_open(S0)


def test_repeated_page_is_idempotent() -> None:
    once = graph_of(split_merge_history())
    twice = graph_of(split_merge_history(), split_merge_history())
    assert once == twice
    assert once.to_json() == twice.to_json()


def test_update_does_not_keep_references_to_input() -> None:
    page = split_history()
    graph = graph_of(page)
    before = graph.to_json()
    page[0]["HashKeyRange"]["StartingHashKey"] = "5"
    assert graph.to_json() == before


def test_shard_values_are_accepted_by_update() -> None:
    shard = Shard.from_listing(listing(0, 0, MAX_HASH_KEY))
    graph = ShardGraph()
    graph.update([shard])
    assert graph.shard(S0) == shard
    assert Shard.from_listing(shard.to_listing()) == shard


def test_accessors() -> None:
    graph = graph_of(split_history())
    assert len(graph) == 3
    assert list(graph) == graph.shard_ids() == [S0, S1, S2]
    assert graph.hash_range(S2) == HashRange(MID, MAX_HASH_KEY)
    assert graph.starting_sequence_number(S1) == listing(1, 0, 1)["SequenceNumberRange"]["StartingSequenceNumber"]
    assert graph.ending_sequence_number(S0) == "900"
    assert graph.ending_sequence_number(S1) is None
    assert graph.max_shard_id() == S2
    assert ShardGraph().max_shard_id() is None


def test_max_shard_id_orders_by_number_not_text() -> None:
    graph = graph_of([listing(0, 0, 9), {**listing(0, 10, MAX_HASH_KEY), "ShardId": "shardId-10"},
                      {**listing(0, 10, 10), "ShardId": "shardId-9"}])
    assert graph.max_shard_id() == "shardId-10"
    assert graph.shard_ids() == [S0, "shardId-9", "shardId-10"]


def test_unknown_shard_queries_raise_key_error_naming_the_shard() -> None:
    graph = graph_of(split_history())
    for query in (graph.parents, graph.children, graph.is_open, graph.hash_range, graph.ancestors):
        with pytest.raises(UnknownShardError, match="shardId-000000000042") as info:
            query(shard_id(42))
        assert isinstance(info.value, KeyError)


# ---------------------------------------------------------------- conflicts

def test_conflicting_parents_message_names_shard_and_values() -> None:
    graph = graph_of(split_history())
    with pytest.raises(ParentConflictError) as info:
        graph.update([listing(2, MID, MAX_HASH_KEY, (1,))])
    error = info.value
    assert isinstance(error, LineageConflictError) and isinstance(error, ValueError)
    assert (error.shard_id, error.attribute, error.old, error.new) == (S2, "parents", (S0,), (S1,))
    text = str(error)
    assert S2 in text and "parents" in text and S0 in text and S1 in text


@pytest.mark.parametrize(
    ("changed", "attribute"),
    [
        (listing(1, 0, MID, (0,)), "hash_range"),
        (listing(1, 0, MID - 1, (0,), starting="123"), "starting_sequence_number"),
    ],
)
def test_conflicting_attributes(changed: dict, attribute: str) -> None:
    graph = graph_of(split_history())
    with pytest.raises(LineageConflictError, match=attribute) as info:
        graph.update([changed])
    assert not isinstance(info.value, ParentConflictError)
    assert info.value.shard_id == S1 and S1 in str(info.value)


def test_conflicting_ending_sequence_number() -> None:
    graph = graph_of(split_history())
    with pytest.raises(LineageConflictError, match="'900'.*'901'"):
        graph.update([listing(0, 0, MAX_HASH_KEY, ending="901")])


def test_conflict_within_one_page() -> None:
    with pytest.raises(ParentConflictError, match=S1):
        ShardGraph().update([listing(1, 0, 5, (0,)), listing(1, 0, 5)])


def test_failed_update_leaves_graph_unchanged() -> None:
    graph = graph_of(split_history())
    before = graph.to_json()
    bad_page = [
        listing(3, 0, MID // 2 - 1, (1,)),
        listing(4, MID // 2, MID - 1, (1,)),
        listing(2, MID, MAX_HASH_KEY, (1,)),
    ]
    with pytest.raises(ParentConflictError):
        graph.update(bad_page)
    assert graph.to_json() == before
    assert graph.open_shards() == [S1, S2]
    assert S3 not in graph and graph.max_shard_id() == S2
    assert graph.ready({S0}) == [S1, S2]


# ------------------------------------------------------------------- cycles

def test_self_parent_is_a_cycle() -> None:
    with pytest.raises(LineageCycleError, match=f"{S1} -> {S1}") as info:
        ShardGraph().update([listing(1, 0, MAX_HASH_KEY, (1,))])
    assert info.value.cycle == (S1,)


def test_two_shard_cycle_across_pages_is_rejected_atomically() -> None:
    graph = graph_of([listing(1, 0, MAX_HASH_KEY, (2,))])
    before = graph.to_json()
    with pytest.raises(LineageCycleError) as info:
        graph.update([listing(2, 0, MAX_HASH_KEY, (1,))])
    assert info.value.cycle == (S1, S2)
    assert f"{S1} -> {S2} -> {S1}" in str(info.value)
    assert graph.to_json() == before


def test_long_cycle_through_merge() -> None:
    page = [
        listing(1, 0, 10, (3,)),
        listing(2, 11, 20),
        listing(3, 0, 20, (2, 4)),
        listing(4, 0, 5, (1,)),
    ]
    with pytest.raises(LineageCycleError) as info:
        ShardGraph().update(page)
    assert info.value.cycle == (S1, S3, S4)


def test_forward_parent_link_without_cycle_is_allowed() -> None:
    graph = graph_of([listing(1, 0, MAX_HASH_KEY, (5,)), listing(5, 0, MAX_HASH_KEY, ending="9")])
    assert graph.parents(S1) == (S5,)
    assert graph.ready(set()) == [S5]
    # With a forward link stored, later updates take the searching path.
    graph.update([listing(6, 0, MAX_HASH_KEY, (1,))])
    graph.update([listing(11, 0, MAX_HASH_KEY, (12,))])
    with pytest.raises(LineageCycleError) as info:
        graph.update([listing(12, 0, MAX_HASH_KEY, (6, 11))])
    assert info.value.cycle == (shard_id(11), shard_id(12))
    with pytest.raises(LineageCycleError) as info:
        graph.update([listing(7, 0, 3, (8,)), listing(8, 0, 3, (7,))])
    assert info.value.cycle == (shard_id(7), shard_id(8))


# ----------------------------------------------------------------- tiling

def test_gap_error_names_the_gap() -> None:
    graph = graph_of([listing(0, 0, 99), listing(1, 200, MAX_HASH_KEY)])
    with pytest.raises(HashSpaceError) as info:
        graph.validate()
    assert info.value.gaps == (HashRange(100, 199),)
    assert info.value.overlaps == ()
    assert "gap [100, 199]" in str(info.value)


def test_gaps_at_both_ends_and_empty_graph() -> None:
    with pytest.raises(HashSpaceError) as info:
        graph_of([listing(0, 1, MAX_HASH_KEY - 1)]).validate()
    assert info.value.gaps == (HashRange(0, 0), HashRange(MAX_HASH_KEY, MAX_HASH_KEY))
    with pytest.raises(HashSpaceError, match=f"gap \\[0, {MAX_HASH_KEY}\\]"):
        ShardGraph().validate()


def test_overlap_error_names_shards_and_ranges() -> None:
    graph = graph_of([listing(0, 0, 150), listing(1, 100, MAX_HASH_KEY)])
    with pytest.raises(HashSpaceError) as info:
        graph.validate()
    assert info.value.overlaps == ((S0, HashRange(0, 150), S1, HashRange(100, MAX_HASH_KEY)),)
    text = str(info.value)
    assert S0 in text and S1 in text and "[0, 150]" in text and f"[100, {MAX_HASH_KEY}]" in text


def test_overlap_of_a_single_key_is_reported() -> None:
    graph = graph_of([listing(0, 0, 100), listing(1, 100, MAX_HASH_KEY)])
    with pytest.raises(HashSpaceError) as info:
        graph.validate()
    assert info.value.overlaps == ((S0, HashRange(0, 100), S1, HashRange(100, MAX_HASH_KEY)),)
    assert info.value.gaps == ()


def test_gap_of_a_single_key_is_reported() -> None:
    graph = graph_of([listing(0, 0, 100), listing(1, 102, MAX_HASH_KEY)])
    with pytest.raises(HashSpaceError, match=r"gap \[101, 101\]"):
        graph.validate()


def test_nested_overlap_is_reported() -> None:
    graph = graph_of([listing(0, 0, MAX_HASH_KEY), listing(1, 10, 20), listing(2, 30, 40)])
    with pytest.raises(HashSpaceError) as info:
        graph.validate()
    assert [(a, b) for a, _, b, _ in info.value.overlaps] == [(S0, S1), (S0, S2)]


def test_partial_listing_is_accepted_by_update_but_fails_validate() -> None:
    graph = graph_of([listing(0, 0, MAX_HASH_KEY, ending="9"), listing(1, 0, MID - 1, (0,))])
    with pytest.raises(HashSpaceError, match="gap"):
        graph.validate()
    graph.update([listing(2, MID, MAX_HASH_KEY, (0,))])
    graph.validate()


# ------------------------------------------------------------------ owner

def test_owner_at_every_boundary() -> None:
    bounds = [(0, 0), (1, 99), (100, MID), (MID + 1, MAX_HASH_KEY - 1), (MAX_HASH_KEY, MAX_HASH_KEY)]
    graph = graph_of([listing(n, lo, hi) for n, (lo, hi) in enumerate(bounds)])
    graph.validate()
    for number, (lo, hi) in enumerate(bounds):
        assert graph.owner(lo) == graph.owner(hi) == shard_id(number)


def test_owner_follows_reshards() -> None:
    graph = graph_of(split_history())
    assert graph.owner(MID - 1) == S1 and graph.owner(MID) == S2
    graph.update([listing(1, 0, MID - 1, (0,), ending="1"), listing(2, MID, MAX_HASH_KEY, (0,), ending="2"),
                  listing(3, 0, MAX_HASH_KEY, (1, 2))])
    assert graph.owner(MID - 1) == graph.owner(MID) == S3


def test_owner_errors() -> None:
    graph = graph_of([listing(0, 10, 20)])
    for key in (0, 9, 21, MAX_HASH_KEY):
        with pytest.raises(NoOwnerError, match=str(key)) as info:
            graph.owner(key)
        assert isinstance(info.value, LookupError) and info.value.hash_key == key
    for key in (-1, MAX_HASH_KEY + 1):
        with pytest.raises(NoOwnerError, match="outside"):
            graph.owner(key)
    with pytest.raises(NoOwnerError, match="no open shards"):
        ShardGraph().owner(5)
    with pytest.raises(TypeError):
        graph.owner("15")  # type: ignore[arg-type]


# -------------------------------------------------------------- malformed

def _with(path: tuple[str, ...], value: object) -> dict:
    shard = listing(7, 0, 10, (3,))
    target = shard
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return shard


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field", "shard"),
    [
        (("ShardId",), _DELETE, "ShardId", None),
        (("ShardId",), "", "ShardId", None),
        (("ShardId",), 7, "ShardId", None),
        (("ParentShardId",), 3, "ParentShardId", shard_id(7)),
        (("AdjacentParentShardId",), shard_id(3), "AdjacentParentShardId", shard_id(7)),
        (("HashKeyRange",), _DELETE, "HashKeyRange", shard_id(7)),
        (("HashKeyRange", "StartingHashKey"), _DELETE, "HashKeyRange.StartingHashKey", shard_id(7)),
        (("HashKeyRange", "StartingHashKey"), "-1", "HashKeyRange.StartingHashKey", shard_id(7)),
        (("HashKeyRange", "StartingHashKey"), "0x10", "HashKeyRange.StartingHashKey", shard_id(7)),
        (("HashKeyRange", "StartingHashKey"), " 1", "HashKeyRange.StartingHashKey", shard_id(7)),
        (("HashKeyRange", "StartingHashKey"), 1.0, "HashKeyRange.StartingHashKey", shard_id(7)),
        (("HashKeyRange", "EndingHashKey"), str(2**128), "HashKeyRange.EndingHashKey", shard_id(7)),
        (("HashKeyRange", "EndingHashKey"), True, "HashKeyRange.EndingHashKey", shard_id(7)),
        (("HashKeyRange", "StartingHashKey"), "11", "HashKeyRange", shard_id(7)),
        (("SequenceNumberRange",), _DELETE, "SequenceNumberRange", shard_id(7)),
        (("SequenceNumberRange", "StartingSequenceNumber"), _DELETE,
         "SequenceNumberRange.StartingSequenceNumber", shard_id(7)),
        (("SequenceNumberRange", "EndingSequenceNumber"), 5,
         "SequenceNumberRange.EndingSequenceNumber", shard_id(7)),
    ],
)
def test_malformed_shard_names_shard_and_field(path, value, field, shard) -> None:
    graph = ShardGraph()
    with pytest.raises(MalformedShardError) as info:
        graph.update([listing(0, 0, 5), _with(path, value)])
    assert (info.value.field, info.value.shard_id) == (field, shard)
    assert field in str(info.value)
    if shard is not None:
        assert shard in str(info.value)
    assert len(graph) == 0, "a malformed page must not be partially applied"


def test_adjacent_parent_equal_to_parent_is_malformed() -> None:
    with pytest.raises(MalformedShardError, match="same as ParentShardId"):
        ShardGraph().update([listing(2, 0, 5, (1, 1))])


def test_start_greater_than_end_message() -> None:
    with pytest.raises(MalformedShardError, match="StartingHashKey is greater than EndingHashKey"):
        ShardGraph().update([listing(0, 10, 9)])


def test_non_dict_shard_and_whole_response_are_rejected() -> None:
    with pytest.raises(MalformedShardError, match="expected a ListShards shard dict"):
        ShardGraph().update(["shardId-000000000000"])  # type: ignore[list-item]
    with pytest.raises(MalformedShardError, match=r"response\['Shards'\]"):
        ShardGraph().update({"Shards": []})  # type: ignore[arg-type]


def test_hash_keys_may_be_ints() -> None:
    shard = listing(0, 0, 0)
    shard["HashKeyRange"] = {"StartingHashKey": 0, "EndingHashKey": MAX_HASH_KEY}
    assert graph_of([shard]).hash_range(S0) == HashRange(0, MAX_HASH_KEY)


def test_boto3_style_none_parents_are_absent() -> None:
    shard = listing(0, 0, MAX_HASH_KEY)
    shard["ParentShardId"] = None
    shard["AdjacentParentShardId"] = None
    assert graph_of([shard]).parents(S0) == ()


# ------------------------------------------------------------------- JSON

def test_json_round_trip_and_canonical_text() -> None:
    graph = graph_of(split_merge_history())
    text = graph.to_json()
    again = ShardGraph.from_json(text)
    assert again == graph and again.to_json() == text
    assert ShardGraph.from_json(text.encode()) == graph
    document = json.loads(text)
    assert document["version"] == 1
    assert [s["ShardId"] for s in document["shards"]] == [S0, S1, S2, S3]
    assert again.open_shards() == [S3] and again.ready({S0, S1, S2}) == [S3]


def test_empty_graph_round_trip() -> None:
    assert ShardGraph.from_json(ShardGraph().to_json()) == ShardGraph()


def test_equality_is_by_content() -> None:
    assert graph_of(split_history()) != graph_of(split_merge_history())
    assert graph_of(split_history()) != object()
    with pytest.raises(TypeError):
        hash(ShardGraph())


def _document(**changes: object) -> str:
    document = json.loads(graph_of(split_history()).to_json())
    document.update(changes)
    return json.dumps(document)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not valid JSON"),
        ("[]", "must be an object"),
        ('{"version": 1}', "missing"),
        (_document(extra=1), "unexpected \\['extra'\\]"),
        (_document(version=2), "version 2 is not supported"),
        (_document(version="1"), "version '1' is not supported"),
        (_document(format="other"), "format is 'other'"),
        (_document(shards={}), "'shards' must be a list"),
        (_document(shards=[{"ShardId": S0}]), "shards\\[0\\].*HashKeyRange"),
        (b"\xff\xfe garbage", "not valid JSON"),
    ],
)
def test_from_json_rejects_garbage(text: str, message: str) -> None:
    with pytest.raises(LineageFormatError, match=message):
        ShardGraph.from_json(text)


def test_from_json_rejects_non_text() -> None:
    with pytest.raises(LineageError, match="str or bytes"):
        ShardGraph.from_json(None)  # type: ignore[arg-type]


def test_from_json_rejects_conflicting_duplicates() -> None:
    document = json.loads(graph_of(split_history()).to_json())
    clash = copy.deepcopy(document["shards"][1])
    clash["ParentShardId"] = S2
    document["shards"].append(clash)
    with pytest.raises(ParentConflictError, match=S1):
        ShardGraph.from_json(json.dumps(document))


def test_lineage_imports_only_stdlib() -> None:
    """The package must stay pure: parse every module's imports rather than trust sys.modules."""
    import ast
    import pathlib
    import sys

    import lineage

    package_dir = pathlib.Path(lineage.__file__).parent
    for path in sorted(package_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in sys.stdlib_module_names or root in {"lineage", "__future__"}, (path.name, root)
