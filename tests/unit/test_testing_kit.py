"""kinesis_src.testing without a server: the delivery verifier, endpoint resolution, stream names, the plugin's loading."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from importlib.metadata import entry_points

import pytest

from kinesis_src import Record
from kinesis_src.testing import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    DeliveryError,
    Endpoints,
    EndpointsUnavailable,
    embedded_endpoints,
    encode,
    endpoints_from_environ,
    unique_stream_name,
    verify_delivery,
)
from kinesis_src.testing import emulators as kit
from kinesis_src.testing.endpoints import unisolated_allowed

pytest_plugins = ["pytester"]

EXPECTED = {"a": 3, "b": 2}  # a:1 a:2 a:3 b:1 b:2


def data(*pairs: tuple[str, int]) -> list[bytes]:
    return [encode(key, n) for key, n in pairs]


IN_ORDER = [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3)]


# -- the verifier ------------------------------------------------------------------


@pytest.mark.parametrize("mode", [EXACTLY_ONCE, AT_LEAST_ONCE])
def test_a_complete_ordered_delivery_is_ok_in_both_modes(mode: str) -> None:
    report = verify_delivery(data(*IN_ORDER), EXPECTED, mode)
    assert report.ok and report.problems == {}
    assert (report.delivered, report.distinct, report.expected, report.keys) == (5, 5, 5, 2)
    assert report.summary().splitlines()[0] == f"keyed-counter delivery check ({mode.replace('_', '-')}): OK"


@pytest.mark.parametrize("mode", [EXACTLY_ONCE, AT_LEAST_ONCE])
def test_missing_records_fail_both_modes_and_are_listed_as_ranges(mode: str) -> None:
    report = verify_delivery(data(("a", 1), ("b", 1)), {"a": 6, "b": 1}, mode, raise_on_failure=False)
    assert report.missing == [("a", n) for n in range(2, 7)]
    assert report.problems == {"missing": 5}
    assert "missing (key: counters):\n  a: 2-6 (5 records)" in report.summary()


def test_duplicates_fail_exactly_once_only() -> None:
    delivered = data(*IN_ORDER, ("a", 2), ("a", 2))
    exactly = verify_delivery(delivered, EXPECTED, EXACTLY_ONCE, raise_on_failure=False)
    assert exactly.problems == {"duplicated": 1}
    assert exactly.duplicates == {("a", 2): 3} and exactly.extra_deliveries == 2
    assert "duplicated (key:counter x times received):\n  a:2 x3" in exactly.summary()
    at_least = verify_delivery(delivered, EXPECTED, AT_LEAST_ONCE)  # does not raise
    assert at_least.ok and at_least.duplicates == {("a", 2): 3}
    assert "1 records, 2 extra deliveries (allowed at least once)" in at_least.summary()


def test_an_at_least_once_replay_is_duplicates_not_disorder() -> None:
    """A consumer that restarts from its last checkpoint delivers 2, 3 again after 3: that is not reordering."""
    replay = [("a", 1), ("a", 2), ("a", 3), ("a", 2), ("a", 3), ("b", 1), ("b", 2)]
    report = verify_delivery(data(*replay), EXPECTED, AT_LEAST_ONCE)
    assert report.out_of_order == [] and report.extra_deliveries == 2
    exactly = verify_delivery(data(*replay), EXPECTED, EXACTLY_ONCE, raise_on_failure=False)
    assert exactly.problems == {"duplicated": 2}


@pytest.mark.parametrize("mode", [EXACTLY_ONCE, AT_LEAST_ONCE])
def test_a_counter_first_delivered_after_a_higher_one_is_out_of_order(mode: str) -> None:
    """The child-before-parent symptom: a:3 (child shard) arrives before a:2 (parent)."""
    records = [
        Record("a", encode("a", 1), "1", 0, "shardId-000000000000", None),
        Record("a", encode("a", 3), "9", 0, "shardId-000000000002", None),
        Record("a", encode("a", 2), "2", 0, "shardId-000000000000", None),
        Record("b", encode("b", 1), "3", 0, "shardId-000000000001", None),
        Record("b", encode("b", 2), "4", 0, "shardId-000000000001", None),
    ]
    report = verify_delivery(records, EXPECTED, mode, raise_on_failure=False)
    assert report.problems == {"out of order": 1}
    (violation,) = report.out_of_order
    assert (violation.key, violation.n, violation.after, violation.index) == ("a", 2, 3, 2)
    assert ("  a: 2 (in shardId-000000000000) delivered after 3 (in shardId-000000000002), at item 2"
            in report.summary())


def test_unexpected_and_malformed_items_fail() -> None:
    delivered = [*data(*IN_ORDER), encode("a", 4), encode("zzz", 1), b"\xff\xfe", b"no-counter", 42]
    report = verify_delivery(delivered, EXPECTED, AT_LEAST_ONCE, raise_on_failure=False)
    assert report.unexpected == [("a", 4), ("zzz", 1)]
    assert report.malformed == ["b'\\xff\\xfe'", "b'no-counter'", "42"]
    assert report.problems == {"unexpected": 2, "malformed": 3}
    text = report.summary()
    assert "unexpected (never acknowledged by Kinesis to the producer):\n  a: 4 (1 record)\n  zzz: 1 (1 record)" in text
    assert "malformed (not b'<key>:<n>' data):\n  b'\\xff\\xfe'" in text


def test_the_failure_is_an_assertion_error_carrying_the_whole_report() -> None:
    with pytest.raises(DeliveryError) as caught:
        verify_delivery(data(("a", 1), ("a", 3), ("a", 2), ("a", 2)), EXPECTED)
    assert isinstance(caught.value, AssertionError)
    text = str(caught.value)
    assert text == caught.value.report.summary()
    assert text.splitlines()[0] == (
        "keyed-counter delivery check (exactly-once): FAILED: 2 missing, 1 duplicated, 1 out of order"
    )
    assert "  b: 1-2 (2 records)" in text and "  a:2 x2" in text and "  a: 2 delivered after 3, at item 2" in text


def test_the_whole_report_text() -> None:
    report = verify_delivery(data(("a", 1), ("a", 3), ("a", 3), ("b", 2)), EXPECTED, raise_on_failure=False)
    assert report.summary().splitlines() == [
        "keyed-counter delivery check (exactly-once): FAILED: 2 missing, 1 duplicated",
        "  expected records   5 over 2 keys",
        "  items received     4 (3 distinct)",
        "  missing            2",
        "  duplicated         1 records, 1 extra deliveries",
        "  out of order       0",
        "  unexpected         0",
        "  malformed          0",
        "missing (key: counters):",
        "  a: 2 (1 record)",
        "  b: 1 (1 record)",
        "duplicated (key:counter x times received):",
        "  a:3 x2",
    ]


def test_examples_are_capped_but_counts_are_not() -> None:
    delivered = data(*[(f"k{i:02d}", 1) for i in range(20)] * 2)
    report = verify_delivery(delivered, {f"k{i:02d}": 1 for i in range(20)}, raise_on_failure=False)
    assert len(report.duplicates) == 20
    text = report.summary(examples=3)
    assert text.count(" x2") == 3 and "duplicated         20 records, 20 extra deliveries" in text


def test_every_input_shape_is_understood() -> None:
    """Record data (bytes or str), Records, row dicts (read_table), (key, n) pairs, an Arrow table, Spark-like rows."""
    import pyarrow as pa

    class Row(tuple):  # what pyspark.sql.Row looks like to the verifier: a tuple with asDict()
        def asDict(self) -> dict:
            return {"partitionKey": self[0], "data": self[1], "shardId": self[2]}

    shapes = [
        encode("a", 1),
        "a:2",
        Record("a", encode("a", 3), "1", 0, "shardId-000000000000", datetime(2024, 1, 1, tzinfo=UTC)),
        {"data": encode("b", 1), "shardId": "shardId-000000000001"},
        ("b", 2),
    ]
    assert verify_delivery(shapes, EXPECTED).ok
    assert verify_delivery([Row(("a", encode(k, n), "s")) for k, n in IN_ORDER], EXPECTED).ok
    table = pa.table({"data": data(*IN_ORDER), "shardId": ["s0"] * 5})
    assert verify_delivery(table, EXPECTED).ok


def test_expected_may_be_a_producer_a_mapping_or_a_set() -> None:
    class Producer:  # KeyedProducer's interface
        def expected(self) -> set[tuple[str, int]]:
            return {("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)}

    for expected in (Producer(), EXPECTED, Producer().expected(), sorted(Producer().expected())):
        assert verify_delivery(data(*IN_ORDER), expected).ok
    with pytest.raises(TypeError, match="KeyedProducer, a mapping"):
        verify_delivery([], 5)
    with pytest.raises(ValueError, match="exactly_once, at_least_once"):
        verify_delivery([], EXPECTED, "twice")
    assert verify_delivery(data(*IN_ORDER), EXPECTED, "at-least-once").mode == AT_LEAST_ONCE


def test_a_shuffled_delivery_of_independent_keys_is_in_order() -> None:
    """Only per-key order matters: keys interleave freely (shards are read in parallel)."""
    delivered = [("b", 1), ("b", 2), ("a", 1), ("a", 2), ("a", 3)]
    assert verify_delivery(delivered, EXPECTED).ok
    assert Counter(k for k, _ in delivered) == Counter({"a": 3, "b": 2})


# -- endpoints -----------------------------------------------------------------


def test_our_endpoint_variables_come_first() -> None:
    found = endpoints_from_environ({
        "KINESIS_SRC_ENDPOINT_URL": "http://127.0.0.1:1", "KINESIS_SRC_DYNAMODB_ENDPOINT_URL": "http://127.0.0.1:2",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:3", "AWS_REGION": "eu-west-1",
    })
    assert found == Endpoints("http://127.0.0.1:1", "http://127.0.0.1:2", "eu-west-1", "environment")
    assert found.details == "Kinesis from KINESIS_SRC_ENDPOINT_URL, DynamoDB from KINESIS_SRC_DYNAMODB_ENDPOINT_URL"


def test_localstacks_single_endpoint_serves_both() -> None:
    found = endpoints_from_environ({"AWS_ENDPOINT_URL": "http://localhost:4566"})
    assert (found.kinesis, found.dynamodb, found.region) == ("http://localhost:4566", "http://localhost:4566", "us-east-1")
    per_service = endpoints_from_environ({"AWS_ENDPOINT_URL_KINESIS": "http://k:1", "AWS_ENDPOINT_URL_DYNAMODB": "http://d:2"})
    assert (per_service.kinesis, per_service.dynamodb) == ("http://k:1", "http://d:2")
    only_kinesis = endpoints_from_environ({"KINESIS_SRC_ENDPOINT_URL": "http://k:1"})
    assert only_kinesis.dynamodb == "http://k:1"  # as kinesis_src.AwsSettings does


def test_no_endpoint_variables_means_start_the_emulators() -> None:
    assert endpoints_from_environ({"AWS_REGION": "us-east-1", "KINESIS_SRC_ENDPOINT_URL": ""}) is None


def test_env_keeps_real_settings_and_fills_in_dummy_ones() -> None:
    found = Endpoints("http://k:1", "http://d:2", "us-east-1", "environment")
    assert found.env({"AWS_PROFILE": "dev", "AWS_REGION": "eu-west-1"}) == {
        "KINESIS_SRC_ENDPOINT_URL": "http://k:1", "KINESIS_SRC_DYNAMODB_ENDPOINT_URL": "http://d:2",
    }
    assert found.env({})["AWS_ACCESS_KEY_ID"] == "test" and found.env({})["AWS_REGION"] == "us-east-1"
    embedded = Endpoints("http://k:1", "http://d:2", "us-east-1", "embedded")
    assert embedded.env({"AWS_ACCESS_KEY_ID": "AKIAREAL", "AWS_REGION": "eu-west-1"})["AWS_ACCESS_KEY_ID"] == "test"


def test_without_isolation_the_emulators_do_not_start_and_the_message_says_what_to_set() -> None:
    with pytest.raises(EndpointsUnavailable) as caught, embedded_endpoints(environ={}):
        pass
    message = str(caught.value)
    assert "KINESIS_SRC_ENDPOINT_URL=http://127.0.0.1:4566" in message and "AWS_ENDPOINT_URL" in message
    assert "python -m kinesis_src.testing isolated" in message and "KINESIS_SRC_ISOLATED=1 is not set" in message
    assert "KINESIS_SRC_ALLOW_UNISOLATED=1" in message  # the way for machines without namespaces


@pytest.mark.parametrize(("value", "allowed"), [("1", True), ("true", True), (" Yes ", True), ("0", False),
                                                ("", False), ("no", False)])
def test_the_unisolated_opt_in_reads_common_true_words(value: str, allowed: bool) -> None:
    assert unisolated_allowed({"KINESIS_SRC_ALLOW_UNISOLATED": value}) is allowed


class _NoNode:
    """An Emulators whose start fails as on a machine without node: proves the isolation check let it start."""

    def __init__(self, **_kwargs: object) -> None:
        pass

    def start(self) -> None:
        raise kit.ToolMissingError("fake: no `node` found")


def test_the_opt_in_lets_the_emulators_start_outside_a_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kit, "Emulators", _NoNode)
    with pytest.raises(EndpointsUnavailable, match="embedded emulators cannot start: fake: no `node`"), \
            embedded_endpoints(environ={"KINESIS_SRC_ALLOW_UNISOLATED": "1"}):
        pass
    with pytest.raises(EndpointsUnavailable, match="KINESIS_SRC_ISOLATED=1 is not set"), \
            embedded_endpoints(environ={"KINESIS_SRC_ALLOW_UNISOLATED": "0"}):
        pass


# -- names and the plugin --------------------------------------------------------


def test_stream_names_are_unique_and_valid() -> None:
    names = {unique_stream_name("test_x[param with spaces/and:colons]") for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert name.startswith("kst-test_x-param-with-spaces-and-colons-") and len(name) <= 128
    assert len(unique_stream_name("x" * 300)) == 128


def test_the_plugin_is_registered_and_provides_its_fixtures(pytestconfig: pytest.Config) -> None:
    (entry,) = [ep for ep in entry_points(group="pytest11") if ep.name == "kinesis_src"]
    assert entry.value == "kinesis_src.testing.plugin"
    plugin = pytestconfig.pluginmanager.get_plugin("kinesis_src")
    assert plugin is not None and plugin.__name__ == "kinesis_src.testing.plugin"
    names = {name for name in dir(plugin) if name.startswith("kinesis_")}
    assert names >= {"kinesis_test_endpoints", "kinesis_test_env", "kinesis_test_client",
                     "kinesis_stream_factory", "kinesis_resharder", "kinesis_keyed_producer"}


def test_fixtures_skip_without_endpoints_or_fail_when_required(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KINESIS_SRC_ENDPOINT_URL", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_KINESIS", "KINESIS_SRC_ISOLATED",
                 "KINESIS_SRC_ALLOW_UNISOLATED"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile("def test_needs_kinesis(kinesis_stream_factory):\n    raise AssertionError('ran')\n")
    skipped = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    skipped.assert_outcomes(skipped=1)
    skipped.stdout.fnmatch_lines(["*no Kinesis endpoint for kinesis_src.testing*KINESIS_SRC_ENDPOINT_URL*"])
    failed = pytester.runpytest("-p", "no:cacheprovider", "--kinesis-require-endpoints")
    failed.assert_outcomes(errors=1)
