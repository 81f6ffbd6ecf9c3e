"""The consumer calls' plans (register, list) run by both drivers, sync and async, on a scripted client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kinesis_src.aws.fanout_calls import (
    Call,
    adrive,
    drive,
    listing_plan,
    register_plan,
)
from kinesis_src.errors import ConsumerLimitError, ThrottledError

STREAM_ARN = "arn:aws:kinesis:us-east-1:000000000000:stream/orders"
WHAT = "RegisterStreamConsumer 'app'"


def consumer(name: str) -> dict[str, Any]:
    return {"ConsumerName": name, "ConsumerARN": f"{STREAM_ARN}/consumer/{name}:1", "ConsumerStatus": "ACTIVE"}


def refusal(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "op")


class Scripted:
    """Answers each operation with the next of its scripted answers (an exception is raised); logs the calls."""

    def __init__(self, **answers: list[Any]) -> None:
        self.answers = answers
        self.calls: list[Call] = []

    def __call__(self, call: Call) -> Any:
        self.calls.append(call)
        answer = self.answers[call.operation].pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def awaited(self, call: Call) -> Any:
        return self(call)


def both(plan_of: Any, client: Scripted) -> list[Any]:
    """The plan's outcome run by :func:`drive` and by :func:`adrive`, each on a fresh copy of the script."""
    script = {op: list(answers) for op, answers in client.answers.items()}
    sync = drive(plan_of(), client)
    again = Scripted(**script)
    return [sync, asyncio.run(adrive(plan_of(), again.awaited))]


def test_register_returns_the_new_consumer() -> None:
    client = Scripted(register_stream_consumer=[{"Consumer": consumer("app")}])
    assert both(lambda: register_plan(STREAM_ARN, "app", WHAT), client) == [consumer("app")] * 2
    assert client.calls == [Call("register_stream_consumer", {"StreamARN": STREAM_ARN, "ConsumerName": "app"})]


def test_register_of_a_taken_name_describes_it() -> None:
    client = Scripted(register_stream_consumer=[refusal("ResourceInUseException")],
                      describe_stream_consumer=[{"ConsumerDescription": consumer("app")}])
    assert both(lambda: register_plan(STREAM_ARN, "app", WHAT), client) == [consumer("app")] * 2
    assert [c.operation for c in client.calls] == ["register_stream_consumer", "describe_stream_consumer"]


@pytest.mark.parametrize("run", ["sync", "async"])
def test_register_in_use_without_such_consumer_means_the_stream_is_not_active_yet(run: str) -> None:
    client = Scripted(register_stream_consumer=[refusal("ResourceInUseException")],
                      describe_stream_consumer=[refusal("ResourceNotFoundException")])
    with pytest.raises(ThrottledError, match="not ACTIVE yet"):
        if run == "sync":
            drive(register_plan(STREAM_ARN, "app", WHAT), client)
        else:
            asyncio.run(adrive(register_plan(STREAM_ARN, "app", WHAT), client.awaited))


@pytest.mark.parametrize("count, error", [(20, ConsumerLimitError), (3, ThrottledError)])
def test_register_over_the_limit_lists_the_consumers_to_tell_which_limit(count: int, error: type) -> None:
    client = Scripted(register_stream_consumer=[refusal("LimitExceededException")],
                      list_stream_consumers=[{"Consumers": [consumer(f"c{i}") for i in range(count)]}])
    with pytest.raises(error):
        drive(register_plan(STREAM_ARN, "app", WHAT), client)


def test_other_refusals_reach_the_caller_unchanged() -> None:
    client = Scripted(register_stream_consumer=[refusal("AccessDeniedException")])
    with pytest.raises(ClientError, match="AccessDeniedException"):
        drive(register_plan(STREAM_ARN, "app", WHAT), client)


def test_listing_walks_every_page_and_stops_at_a_repeated_token() -> None:
    client = Scripted(list_stream_consumers=[
        {"Consumers": [consumer("a")], "NextToken": "t1"},
        {"Consumers": [consumer("b")], "NextToken": "t2"},
        {"Consumers": [consumer("c")], "NextToken": "t2"},  # LocalStack repeats the last name as a token
    ])
    sync, async_ = both(lambda: listing_plan(STREAM_ARN), client)
    assert [c.name for c in sync] == [c.name for c in async_] == ["a", "b", "c"]
    assert [c.args.get("NextToken") for c in client.calls] == [None, "t1", "t2"]
