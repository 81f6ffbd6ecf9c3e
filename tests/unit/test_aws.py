"""The AWS boundary: error translation, retries and pagination (moto and botocore's Stubber)."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import traceback

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from scripted_endpoint import SECRET, Endpoints, records

from kinesis_src.aws import KinesisClient
from kinesis_src.aws.async_kinesis import AsyncKinesisClient
from kinesis_src.config import AwsSettings
from kinesis_src.errors import (
    AccessDeniedError,
    ConfigurationError,
    EndpointUnreachableError,
    InvalidRequestError,
    MalformedResponseError,
    RetriesExhaustedError,
    ShardNotFoundError,
    StreamNotFoundError,
    TruncatedResponseError,
)
from kinesis_src.positions import Position
from kinesis_src.retrieval.polling import ShardReader
from kinesis_src.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=4, initial_backoff_s=0.001, max_backoff_s=0.002, deadline_s=5)


@pytest.fixture
def moto_kinesis(dummy_credentials: None):
    with mock_aws():
        plain = boto3.client("kinesis", region_name="us-east-1")
        plain.create_stream(StreamName="orders", ShardCount=3)
        yield plain, KinesisClient(AwsSettings(region="us-east-1", retry=FAST))


def test_missing_stream_is_named(moto_kinesis) -> None:
    _, kinesis = moto_kinesis
    with pytest.raises(StreamNotFoundError) as info:
        kinesis.list_shards("no-such-stream")
    message = str(info.value)
    assert "'no-such-stream'" in message and "us-east-1" in message and "create the stream" in message
    with pytest.raises(StreamNotFoundError, match="no-such-stream"):
        kinesis.describe_stream("no-such-stream")
    with pytest.raises(StreamNotFoundError, match="no-such-stream"):
        kinesis.get_shard_iterator("no-such-stream", "shardId-000000000000", Position.trim_horizon())


def test_missing_shard_is_named(moto_kinesis) -> None:
    _, kinesis = moto_kinesis
    with pytest.raises(ShardNotFoundError) as info:
        kinesis.get_shard_iterator("orders", "shardId-000000000099", Position.trim_horizon())
    assert "shardId-000000000099" in str(info.value) and "'orders'" in str(info.value)


def test_list_shards_follows_pagination_without_resending_the_stream_name(dummy_credentials: None) -> None:
    """AWS rejects StreamName together with NextToken, so later pages carry only the token."""
    kinesis, stub = _stubbed()
    shard = LIST_OK["Shards"][0]
    second = dict(shard, ShardId="shardId-000000000001")
    stub.add_response(
        "list_shards",
        {"Shards": [shard], "NextToken": "t1"},
        {"StreamName": "orders", "MaxResults": 1, "ExclusiveStartShardId": "shardId-000000000000"},
    )
    stub.add_response("list_shards", {"Shards": [second]}, {"NextToken": "t1", "MaxResults": 1})
    with stub:
        shards = kinesis.list_shards("orders", exclusive_start_shard_id="shardId-000000000000", page_size=1)
    assert [s["ShardId"] for s in shards] == ["shardId-000000000000", "shardId-000000000001"]
    stub.assert_no_pending_responses()


def test_fast_path_under_the_client_equals_plain_boto3(moto_kinesis) -> None:
    plain, kinesis = moto_kinesis
    for i, pk in enumerate(["α", "b", "ключ", ""] * 5):
        plain.put_record(StreamName="orders", PartitionKey=pk or "empty", Data=f"v{i}".encode() * (i % 3))
    for shard in kinesis.list_shards("orders"):
        iterator = plain.get_shard_iterator(StreamName="orders", ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        expected = plain.get_records(ShardIterator=iterator, Limit=100)
        page = kinesis.get_records(iterator, 100, shard["ShardId"], "orders")
        assert page.sequence_numbers == [r["SequenceNumber"] for r in expected["Records"]]
        assert page.data == [r["Data"] for r in expected["Records"]]
        assert page.partition_keys == [r["PartitionKey"] for r in expected["Records"]]
        assert [r.approximate_arrival_timestamp for r in page.records(shard["ShardId"])] == [
            r["ApproximateArrivalTimestamp"] for r in expected["Records"]
        ]


def _stubbed(dummy: None = None) -> tuple[KinesisClient, Stubber]:
    kinesis = KinesisClient(AwsSettings(region="us-east-1", endpoint_url="http://127.0.0.1:1", retry=FAST))
    return kinesis, Stubber(kinesis._client)


LIST_OK = {"Shards": [{"ShardId": "shardId-000000000000", "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "1"}, "SequenceNumberRange": {"StartingSequenceNumber": "1"}}]}


@pytest.mark.parametrize(
    "code, status",
    [
        ("ProvisionedThroughputExceededException", 400),
        ("LimitExceededException", 400),
        ("InternalFailure", 500),
        ("ServiceUnavailable", 503),
    ],
)
def test_throttling_and_5xx_are_retried(dummy_credentials: None, code: str, status: int) -> None:
    kinesis, stub = _stubbed()
    stub.add_client_error("list_shards", service_error_code=code, http_status_code=status)
    stub.add_client_error("list_shards", service_error_code=code, http_status_code=status)
    stub.add_response("list_shards", LIST_OK)
    with stub:
        assert kinesis.list_shards("orders")[0]["ShardId"] == "shardId-000000000000"
    stub.assert_no_pending_responses()


def test_persistent_throttling_gives_up_with_the_operation_named(dummy_credentials: None) -> None:
    kinesis, stub = _stubbed()
    for _ in range(FAST.max_attempts):
        stub.add_client_error("list_shards", service_error_code="ProvisionedThroughputExceededException", http_status_code=400)
    with stub, pytest.raises(RetriesExhaustedError) as info:
        kinesis.list_shards("orders")
    assert "ListShards of stream 'orders'" in str(info.value) and "4 attempt" in str(info.value)


@pytest.mark.parametrize(
    "code, error",
    [("AccessDeniedException", AccessDeniedError), ("InvalidArgumentException", InvalidRequestError)],
)
def test_permanent_errors_are_not_retried(dummy_credentials: None, code: str, error: type) -> None:
    kinesis, stub = _stubbed()
    stub.add_client_error("list_shards", service_error_code=code, service_message="nope", http_status_code=400)
    with stub, pytest.raises(error, match="nope"):
        kinesis.list_shards("orders")
    stub.assert_no_pending_responses()


def test_a_missing_permission_names_the_action_and_the_policy_doc(dummy_credentials: None) -> None:
    """AWS says AccessDeniedException; moto and some proxies answer a bare 403 with an XML body. Both name the
    action the credentials lack and where the policies are, and neither is retried."""
    for code, message in [
        ("AccessDeniedException", ("User: arn:aws:iam::1:user/u is not authorized to perform: kinesis:ListShards on "
                                   "resource: arn:aws:kinesis:us-east-1:1:stream/orders")),
        ("403", ("<?xml version=\"1.0\"?><ErrorResponse><Errors><Error><Code>AccessDenied</Code><Message>User: "
                 "arn:aws:iam::1:user/u is not authorized to perform: kinesis:ListShards</Message></Error></Errors>")),
    ]:
        kinesis, stub = _stubbed()
        stub.add_client_error("list_shards", service_error_code=code, service_message=message, http_status_code=403)
        with stub, pytest.raises(AccessDeniedError) as info:
            kinesis.list_shards("orders")
        stub.assert_no_pending_responses()
        assert "not allowed to call kinesis:ListShards" in str(info.value) and "docs/iam.md" in str(info.value)
        assert "<?xml" not in str(info.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_is_named_after_bounded_retries(dummy_credentials: None) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    kinesis = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=url, retry=FAST, connect_timeout_s=0.5))
    with pytest.raises(RetriesExhaustedError) as info:
        kinesis.describe_stream("orders")
    assert url in str(info.value) and "'orders'" in str(info.value)
    assert isinstance(info.value.last_error, EndpointUnreachableError)


def test_missing_credentials_say_what_to_set(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    kinesis = KinesisClient(AwsSettings(region="us-east-1", endpoint_url=f"http://127.0.0.1:{_closed_port()}", retry=FAST))
    with pytest.raises(AccessDeniedError, match="AWS_ACCESS_KEY_ID"):
        kinesis.describe_stream("orders")


@pytest.mark.parametrize("url", ["localhost:4566", "ftp://x", "http://", "http://h:notaport"])
def test_malformed_endpoint_urls_are_rejected_before_any_call(url: str) -> None:
    with pytest.raises(ConfigurationError, match="endpoint_url"):
        AwsSettings(region="us-east-1", endpoint_url=url)


def test_region_is_required_and_read_from_env() -> None:
    with pytest.raises(ConfigurationError, match="AWS_REGION"):
        AwsSettings.from_env(environ={})
    settings = AwsSettings.from_env(environ={"AWS_DEFAULT_REGION": "eu-west-1", "KINESIS_SRC_ENDPOINT_URL": "http://127.0.0.1:4567"})
    assert settings.region == "eu-west-1"
    assert settings.effective_dynamodb_endpoint_url == "http://127.0.0.1:4567"


@pytest.mark.parametrize(
    "url",
    [
        "http://AKIACANARYUSER:canary-s3cr3t@127.0.0.1:4566",
        "https://AKIACANARYUSER@kinesis.us-east-1.amazonaws.com",
        "http://:canary-s3cr3t@127.0.0.1:4566",
        "ftp://AKIACANARYUSER:canary-s3cr3t@127.0.0.1",  # the scheme check must not echo it either
        "http://127.0.0.1:4566/?X-Amz-Security-Token=canary-s3cr3t",
        "http://127.0.0.1:4566/#canary-s3cr3t",
    ],
)
def test_credentials_in_endpoint_urls_are_rejected_without_echoing_them(url: str) -> None:
    for build in (
        lambda: AwsSettings(region="us-east-1", endpoint_url=url),
        lambda: AwsSettings(region="us-east-1", dynamodb_endpoint_url=url),
        lambda: AwsSettings.from_env(environ={"AWS_REGION": "us-east-1", "KINESIS_SRC_ENDPOINT_URL": url}),
    ):
        with pytest.raises(ConfigurationError) as info:
            build()
        message = str(info.value)
        assert "endpoint_url" in message
        assert "canary-s3cr3t" not in message and "AKIACANARYUSER" not in message


def test_endpoint_url_with_userinfo_says_where_credentials_belong() -> None:
    with pytest.raises(ConfigurationError) as info:
        AwsSettings(region="us-east-1", endpoint_url="http://user:pw@127.0.0.1:4566")
    message = str(info.value)
    assert "http://127.0.0.1:4566" in message  # what to use instead
    assert "AWS_ACCESS_KEY_ID" in message


def test_endpoint_urls_with_whitespace_are_rejected() -> None:
    with pytest.raises(ConfigurationError, match="whitespace"):
        AwsSettings.from_env(environ={"AWS_REGION": "us-east-1", "KINESIS_SRC_ENDPOINT_URL": "http://127.0.0.1:4566\n"})


CANARY = SECRET  # a payload no error may show (the scripted endpoint serves it too)


@pytest.fixture
def malformed_endpoint(dummy_credentials: None):
    """An HTTP endpoint answering every call with a 200 GetRecords body whose record is malformed."""
    body = json.dumps({"Records": [{"SequenceNumber": "1", "Data": CANARY, "PartitionKey": CANARY}]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield AwsSettings(region="us-east-1", endpoint_url=f"http://127.0.0.1:{server.server_address[1]}", retry=FAST)
    server.shutdown()
    server.server_close()


def _assert_names_shard_not_data(error: BaseException) -> None:
    message = str(error)
    assert "shardId-000000000007" in message and "'orders'" in message and "Records[0].Data" in message
    assert CANARY not in "".join(traceback.format_exception(error))


def test_malformed_get_records_names_shard_stream_and_field_never_data(malformed_endpoint: AwsSettings) -> None:
    kinesis = KinesisClient(malformed_endpoint)
    with pytest.raises(MalformedResponseError) as info:
        kinesis.get_records("iterator", 10, "shardId-000000000007", "orders")
    _assert_names_shard_not_data(info.value)


def test_malformed_get_records_names_shard_stream_and_field_async(malformed_endpoint: AwsSettings) -> None:
    async def read() -> None:
        async with AsyncKinesisClient(malformed_endpoint) as kinesis:
            await kinesis.get_records("iterator", 10, "shardId-000000000007", "orders")

    with pytest.raises(MalformedResponseError) as info:
        asyncio.run(read())
    _assert_names_shard_not_data(info.value)


def test_a_callers_plain_botocore_session_reads_records(dummy_credentials: None) -> None:
    """GetRecords must not depend on the session having our parser registered (it failed with KeyError('Page'))."""
    session = botocore.session.get_session()
    factory_before = session.get_component("response_parser_factory")
    with mock_aws():
        kinesis = KinesisClient(AwsSettings(region="us-east-1", retry=FAST), session=session)
        kinesis.create_stream("orders", 1)
        kinesis.put_records("orders", [("k", b"one"), ("k", b"two")])
        iterator = kinesis.get_shard_iterator("orders", "shardId-000000000000", Position.trim_horizon())
        page = kinesis.get_records(iterator, 10, "shardId-000000000000", "orders")
        assert page.data == [b"one", b"two"]
        plain = session.create_client("kinesis", region_name="us-east-1")
        untouched = plain.get_records(ShardIterator=iterator, Limit=10)
    assert session.get_component("response_parser_factory") is factory_before  # the caller's session is left alone
    assert [r["Data"] for r in untouched["Records"]] == [b"one", b"two"]


# -- bodies cut short by a broken connection (found by the fault campaign's TRUNCATE fault) ------------

SERVED = records(20)  # a GetRecords body long enough that half of it is no JSON


@pytest.fixture
def scripted(dummy_credentials: None):
    """``scripted(**script)``: a scripted endpoint (tests/scripted_endpoint.py) and settings pointing at it."""
    endpoints = Endpoints(SERVED, FAST)
    yield endpoints.start
    endpoints.close()


SYNC_CALLS = {
    "GetRecords": lambda k: k.get_records("it-1", 100, "shardId-000000000000", "orders").sequence_numbers[0],
    "ListShards": lambda k: k.list_shards("orders")[0]["ShardId"],
    "GetShardIterator": lambda k: k.get_shard_iterator("orders", "shardId-000000000000", Position.trim_horizon()),
    "DescribeStreamSummary": lambda k: k.describe_stream("orders").status,
}
ANSWERS = {"GetRecords": SERVED[0].sequence_number, "ListShards": "shardId-000000000000", "GetShardIterator": "it-1",
           "DescribeStreamSummary": "ACTIVE"}


def task_client(settings: AwsSettings) -> KinesisClient:
    """A Spark task's client: bodies read in one read (kinesis_src.spark.tasks)."""
    from kinesis_src.aws.whole_body import read_bodies_whole

    kinesis = KinesisClient(settings)
    read_bodies_whole(kinesis.botocore_client)
    return kinesis


CLIENTS = {"plain": KinesisClient, "task": task_client}


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("operation", sorted(SYNC_CALLS))
def test_a_truncated_body_is_retried_not_parsed(scripted, operation: str, client: str) -> None:
    """botocore reads with enforce_content_length=False: without our check a cut GetRecords body was a
    non-retriable MalformedResponseError and a cut ListShards body an empty list of shards."""
    endpoint, settings = scripted(**{operation: ["truncate", "truncate"]})
    assert SYNC_CALLS[operation](CLIENTS[client](settings)) == ANSWERS[operation]
    assert endpoint.requests[operation] == 3


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_body_truncated_every_time_gives_up_naming_the_call(scripted, client: str) -> None:
    _, settings = scripted(ListShards=["truncate"] * FAST.max_attempts)
    with pytest.raises(RetriesExhaustedError) as info:
        CLIENTS[client](settings).list_shards("orders")
    assert isinstance(info.value.last_error, TruncatedResponseError)
    message = str(info.value.last_error)
    assert "ListShards of stream 'orders'" in message and settings.endpoint_url in message
    assert "Content-Length" in message


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_whole_success_body_that_is_not_json_is_malformed_not_empty(scripted, client: str) -> None:
    """botocore parses it as {'message': body} and keeps no member: ListShards would say 'no shards'."""
    endpoint, settings = scripted(ListShards=["garbage"])
    with pytest.raises(MalformedResponseError) as info:
        CLIENTS[client](settings).list_shards("orders")
    assert endpoint.requests["ListShards"] == 1  # not retried: the service answered
    assert "ListShards of stream 'orders'" in str(info.value) and "not JSON" in str(info.value)
    assert CANARY not in "".join(traceback.format_exception(info.value))


ASYNC_CALLS = {
    "GetRecords": lambda k: k.get_records("it-1", 100, "shardId-000000000000", "orders"),
    "GetShardIterator": lambda k: k.get_shard_iterator("orders", "shardId-000000000000", Position.trim_horizon()),
    "DescribeStreamSummary": lambda k: _status(k),
}


async def _status(kinesis: AsyncKinesisClient) -> str:
    return (await kinesis.describe_stream("orders")).status


@pytest.mark.parametrize("operation", sorted(ASYNC_CALLS))
def test_a_truncated_body_is_retried_async(scripted, operation: str) -> None:
    """aiohttp raises ClientPayloadError (-> ConnectionClosedError -> EndpointUnreachableError) itself."""
    endpoint, settings = scripted(**{operation: ["truncate", "truncate"]})

    async def run() -> object:
        async with AsyncKinesisClient(settings) as kinesis:
            return await ASYNC_CALLS[operation](kinesis)

    out = asyncio.run(run())
    assert (out.sequence_numbers[0] if operation == "GetRecords" else out) == ANSWERS[operation]
    assert endpoint.requests[operation] == 3


def test_a_whole_success_body_that_is_not_json_is_malformed_async(scripted) -> None:
    endpoint, settings = scripted(GetShardIterator=["garbage"])

    async def run() -> object:
        async with AsyncKinesisClient(settings) as kinesis:
            return await kinesis.get_shard_iterator("orders", "shardId-000000000000", Position.trim_horizon())

    with pytest.raises(MalformedResponseError, match="GetShardIterator"):
        asyncio.run(run())
    assert endpoint.requests["GetShardIterator"] == 1


def test_the_reader_names_shard_and_stream_once_and_the_position(scripted) -> None:
    _, settings = scripted(GetRecords=["malformed"])
    reader = ShardReader(KinesisClient(settings), "orders", "shardId-000000000007", Position.trim_horizon(),
                         fetch_interval_s=0)
    with pytest.raises(MalformedResponseError) as info:
        reader.fetch()
    message = str(info.value)
    assert message.count("shardId-000000000007") == 1 and message.count("'orders'") == 1, message
    assert str(Position.trim_horizon()) in message and "Records[0].Data" in message
    assert CANARY not in "".join(traceback.format_exception(info.value))


# -- one botocore session per process -------------------------------------------------------------


@pytest.fixture
def sessions_built(monkeypatch: pytest.MonkeyPatch) -> list[botocore.session.Session]:
    """Every botocore session constructed while the test runs (our own and any other)."""
    built: list[botocore.session.Session] = []
    original = botocore.session.Session.__init__

    def counting_init(self, *args, **kwargs) -> None:
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(botocore.session.Session, "__init__", counting_init)
    return built


def test_clients_of_one_process_share_one_session(dummy_credentials: None, sessions_built: list) -> None:
    """Each session loads the service models and resolves credentials again (~0.3-0.7 s a client)."""
    from kinesis_src.aws import DynamoDBClient

    settings = AwsSettings(region="eu-west-1", endpoint_url="http://127.0.0.1:9", retry=FAST)
    clients = [KinesisClient(settings), DynamoDBClient(settings), KinesisClient(settings)]
    same_again = AwsSettings(region="eu-west-1", endpoint_url="http://127.0.0.1:8", retry=RetryPolicy(max_attempts=2))
    clients.append(KinesisClient(same_again))  # endpoint and retry are the client's, not the session's
    assert len(sessions_built) == 1
    assert len({c.botocore_client._request_signer._credentials.access_key for c in clients if hasattr(c, "botocore_client")}) == 1


def test_other_credentials_or_region_get_their_own_session(
    dummy_credentials: None, sessions_built: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kinesis_src.aws.boundary import new_session
    from kinesis_src.config import CredentialSource

    base = AwsSettings(region="eu-west-1")
    first = new_session(base)
    assert new_session(base) is first
    assert new_session(AwsSettings(region="eu-central-1")) is not first  # an assumed role's STS region
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    assert new_session(base) is first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "other-key")  # the environment the chain resolves from changed
    other_env = new_session(base)
    assert other_env is not first
    assert other_env.get_credentials().access_key == "other-key"
    role = AwsSettings(region="eu-west-1", credentials=CredentialSource(role_arn="arn:aws:iam::123456789012:role/r"))
    assert new_session(role) is not other_env


def test_a_handler_registered_later_gets_a_session_that_has_it(
    dummy_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto registers its stubber in botocore's built-in handlers on import: a session cached before
    that would send a mocked test's calls to the network."""
    import botocore.handlers

    from kinesis_src.aws.boundary import new_session

    settings = AwsSettings(region="eu-west-1")
    before = new_session(settings)
    late = ("before-send", lambda **kwargs: None)
    monkeypatch.setattr(botocore.handlers, "BUILTIN_HANDLERS", [*botocore.handlers.BUILTIN_HANDLERS, late])
    after = new_session(settings)
    assert after is not before
    assert new_session(settings) is after


def test_a_forked_process_builds_its_own_session(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session (its credential refresh lock, its cached providers) is not carried across fork()."""
    import os

    from kinesis_src.aws.boundary import new_session

    settings = AwsSettings(region="eu-west-1")
    parent = new_session(settings)
    monkeypatch.setattr(os, "getpid", lambda: -1)
    assert new_session(settings) is not parent


def test_threads_creating_clients_at_once_share_the_session(dummy_credentials: None, sessions_built: list) -> None:
    settings = AwsSettings(region="ap-south-1", endpoint_url="http://127.0.0.1:9", retry=FAST)
    start = threading.Barrier(8)
    made: list[KinesisClient] = []
    errors: list[BaseException] = []

    def make() -> None:
        try:
            start.wait(timeout=30)
            made.append(KinesisClient(settings))
        except Exception as exc:  # noqa: BLE001  (reported by the assertion below)
            errors.append(exc)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and len(made) == 8
    assert len(sessions_built) == 1


def test_a_task_client_reads_each_body_in_one_read(scripted, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's own read is 64 KiB chunks joined (raw.stream()); the task client never streams a body."""
    import urllib3.response

    streamed: list[int] = []
    chunks = urllib3.response.HTTPResponse.stream

    def counting(self, *args, **kwargs):
        streamed.append(1)
        return chunks(self, *args, **kwargs)

    _, settings = scripted()
    kinesis, plain = task_client(settings), KinesisClient(settings)
    monkeypatch.setattr(urllib3.response.HTTPResponse, "stream", counting)
    assert SYNC_CALLS["GetRecords"](kinesis) == ANSWERS["GetRecords"]
    assert kinesis.list_shards("orders")[0]["ShardId"] == "shardId-000000000000"
    assert streamed == []
    assert plain.list_shards("orders")[0]["ShardId"] == "shardId-000000000000"
    assert streamed == [1]


def test_a_task_client_names_a_malformed_page_like_the_plain_one(malformed_endpoint: AwsSettings) -> None:
    with pytest.raises(MalformedResponseError) as info:
        task_client(malformed_endpoint).get_records("iterator", 10, "shardId-000000000007", "orders")
    _assert_names_shard_not_data(info.value)


def test_a_task_client_reports_a_dead_endpoint_like_the_plain_one(dummy_credentials: None) -> None:
    settings = AwsSettings(region="us-east-1", endpoint_url="http://127.0.0.1:9", retry=FAST)
    for make in CLIENTS.values():
        with pytest.raises(RetriesExhaustedError) as info:
            make(settings).list_shards("orders")
        assert isinstance(info.value.last_error, EndpointUnreachableError)
