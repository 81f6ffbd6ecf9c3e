"""ConsumerConfig: one frozen value, checked once; Consumer(config) and Consumer(stream, **options) agree."""

from __future__ import annotations

import dataclasses

import pytest

from kinesis_src import Consumer, ConsumerConfig, KeyRange, LeaseTiming, Position
from kinesis_src.consumer import FetchPacing
from kinesis_src.errors import ConfigurationError
from kinesis_src.retrieval.registration import ConsumerMode


def config(**options: object) -> ConsumerConfig:
    return ConsumerConfig("orders", application_name="app", region="us-east-1", **options)  # type: ignore[arg-type]


def test_input_forms_are_normalized_once() -> None:
    made = config(initial_position="latest", key_range="1/4", consumer_mode="efo", consumer_name="app-1")
    assert made.streams == ("orders",)
    assert made.initial_position == Position.parse("latest")
    assert made.key_range == KeyRange.slice(1, 4)
    assert made.consumer_mode is ConsumerMode.EFO
    assert made.lease_table_name == "kinesis-src-app"
    assert made.worker_id
    assert made.settings.region == "us-east-1"


def test_a_config_is_frozen_and_replace_keeps_it_valid() -> None:
    made = config(idle_interval_s=0.5, key_range="0/2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.prefetch_batches = 3  # type: ignore[misc]
    varied = dataclasses.replace(made, prefetch_batches=3)
    assert (varied.prefetch_batches, varied.pacing, varied.key_range, varied.worker_id) == (
        3, made.pacing, made.key_range, made.worker_id)
    with pytest.raises(ConfigurationError, match="prefetch_batches"):
        dataclasses.replace(made, prefetch_batches=0)


def test_the_two_spellings_build_the_same_consumer(dummy_credentials: None) -> None:
    made = config(worker_id="w-1", key_range="0/2")
    assert Consumer(made).config is made
    spelled = Consumer("orders", application_name="app", region="us-east-1", worker_id="w-1", key_range="0/2")
    assert dataclasses.replace(spelled.config) == made
    assert Consumer(made).worker_id == "w-1"


def test_a_misspelt_option_names_itself_and_the_options() -> None:
    with pytest.raises(ConfigurationError, match=r"'prefetch_batchs'.*prefetch_batches"):
        Consumer("orders", application_name="app", region="us-east-1", prefetch_batchs=2)


def test_a_config_takes_no_options_beside_it() -> None:
    with pytest.raises(ConfigurationError, match="worker_id.*ConsumerConfig"):
        Consumer(config(), worker_id="w-2")


def test_pacing_is_either_the_idle_interval_or_a_whole_pacing() -> None:
    assert config(idle_interval_s=0.25).pacing == FetchPacing(idle_interval_s=0.25)
    whole = FetchPacing(idle_interval_s=0, min_interval_s=0)
    assert config(pacing=whole).pacing is whole
    with pytest.raises(ConfigurationError, match="idle_interval_s or pacing"):
        config(idle_interval_s=0.25, pacing=whole)


@pytest.mark.parametrize(("options", "named"), [
    ({"max_records_per_fetch": 0}, "max_records_per_fetch"),
    ({"release_timeout_s": -1}, "release_timeout_s"),
    ({"lease_timing": 10}, "lease_timing"),
    ({"consumer_name": "x"}, "consumer_name"),
    ({"initial_position": "yesterday"}, "initial_position"),
    ({"key_range": 3}, "key_range"),
])
def test_a_wrong_value_fails_naming_the_option(options: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        config(**options)


def test_an_option_set_on_a_built_consumer_is_refused_not_ignored(dummy_credentials: None) -> None:
    consumer = Consumer(config())
    with pytest.raises(ConfigurationError, match=r"pacing is an option.*Consumer\(\.\.\., pacing=\.\.\.\)"):
        consumer.pacing = FetchPacing(0, 0)  # type: ignore[attr-defined]
    with pytest.raises(ConfigurationError, match="prefetch_batches is an option"):
        consumer.prefetch_batches = 4  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        consumer.anything_else = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(("options", "message"), [
    ({"prefetch_batches": "3"}, "prefetch_batches must be an int, got '3'"),
    ({"max_records_per_fetch": 2.5}, "max_records_per_fetch must be an int"),
    ({"release_timeout_s": None}, "release_timeout_s must be a number, got None"),
    ({"idle_interval_s": True}, "idle_interval_s must be a number"),
    ({"handle_signals": "no"}, "handle_signals must be True or False, got 'no'"),
    ({"worker_id": 5}, "worker_id must be a string"),
    ({"retry": "x"}, "retry must be a RetryPolicy"),
    ({"lease_table_name": "ab"}, "lease_table_name 'ab' is not a DynamoDB table name"),
    ({"worker_id": "tab\there"}, "worker id"),
])
def test_an_option_of_the_wrong_type_fails_naming_it_and_the_type(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        config(**options)


def test_none_means_the_default_for_lease_timing_and_numbers_may_be_ints() -> None:
    made = config(lease_timing=None, idle_interval_s=1, release_timeout_s=0)
    assert made.lease_timing == LeaseTiming() and made.pacing == FetchPacing(idle_interval_s=1)
