"""The Kinesis read calls on aiobotocore: the Consumer's GetRecords of many shards on one loop.

The sync client's rules hold: our retries, one translation, the fast decode of :mod:`.decode`."""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from aiobotocore.config import AioConfig
from aiobotocore.parsers import AioJSONParser, AioResponseParserFactory
from aiobotocore.session import AioSession, get_session

from ..config import AwsSettings
from ..errors import ResourceNotFoundError, StreamNotFoundError
from ..positions import Position
from ..records import RecordPage
from .boundary import acall, millisecond_timestamps, new_session
from .credentials import configure_aio
from .decode import check_complete, decode_get_records, fast_parse, page_of
from .direct_get_records import DirectGetRecords, wanted
from .fanout_calls import Call, adrive
from .kinesis import StreamSummary, shard_listing_plan, shard_not_found, stream_not_found, stream_summary
from .sigv4 import Keys

if TYPE_CHECKING:
    from .async_fanout import AsyncFanOut

log = logging.getLogger(__name__)
T = TypeVar("T")



class AioFastGetRecordsParser(AioJSONParser):
    """aiobotocore's JSON parser with GetRecords on the fast path and the guards of
    :class:`.decode.FastGetRecordsParser` (aiohttp usually raises a cut body first)."""

    async def parse(self, response: dict[str, Any], shape: Any) -> Any:
        check_complete(response)
        parsed = fast_parse(self, response, shape, decode_get_records)
        return parsed if parsed is not None else await super().parse(response, shape)


class AioFastResponseParserFactory(AioResponseParserFactory):
    """Hands out :class:`AioFastGetRecordsParser` for JSON, with its own copy of the parser settings."""

    def __init__(self) -> None:
        super().__init__()
        self.settings: dict[str, Any] = {}

    def set_parser_defaults(self, **kwargs: Any) -> None:
        self.settings.update(kwargs)
        super().set_parser_defaults(**kwargs)

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "json":
            return AioFastGetRecordsParser(**self.settings)
        return super().create_parser(protocol_name)


def new_aio_session(settings: AwsSettings | None = None) -> AioSession:
    """An aiobotocore session with the fast GetRecords parser and the settings' profile and role,
    reading models through the botocore session's loader (:func:`.boundary.new_session`): once."""
    session = millisecond_timestamps(get_session())
    session.register_component("response_parser_factory", AioFastResponseParserFactory())
    if settings is not None:
        session.register_component("data_loader", new_session(settings).get_component("data_loader"))
        configure_aio(session, settings.credentials, settings.region)
    return session


def aio_client_config(settings: AwsSettings, max_connections: int) -> AioConfig:
    return AioConfig(
        region_name=settings.region,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        retries={"total_max_attempts": 1},
        max_pool_connections=max_connections,
        user_agent_appid="kinesis-src",
    )


class AsyncKinesisClient:
    """GetShardIterator / GetRecords / DescribeStreamSummary on aiobotocore, opened with
    ``async with``; ``max_connections`` sizes the pool: one per shard this process reads."""

    def __init__(self, settings: AwsSettings, max_connections: int = 64) -> None:
        self.settings = settings
        self.endpoint = settings.endpoint_url or f"Kinesis in {settings.region}"
        self._max_connections = max_connections
        self._context: Any = None
        self._client: Any = None
        self._direct: DirectGetRecords | None = None

    async def __aenter__(self) -> AsyncKinesisClient:
        session = new_aio_session(self.settings)
        self._context = session.create_client(
            "kinesis",
            region_name=self.settings.region,
            endpoint_url=self.settings.endpoint_url,
            config=aio_client_config(self.settings, self._max_connections),
        )
        self._client = await self._context.__aenter__()
        if wanted(self.settings, self._client.meta.endpoint_url):
            self._direct = DirectGetRecords(
                self._client.meta.endpoint_url, self._client.meta.region_name, _keys_of(session), self.settings,
                self._max_connections, session.get_config_variable("ca_bundle"),
            )
            await self._direct.open()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        context, self._context, self._client = self._context, None, None
        direct, self._direct = self._direct, None
        if direct is not None:
            await direct.close()
        if context is not None:
            await context.__aexit__(*exc_info)

    async def _call(self, what: str, fn: Callable[[], Awaitable[T]]) -> T:
        return await acall(what, self.endpoint, self.settings.retry, fn)

    @property
    def botocore_client(self) -> Any:
        """The aiobotocore client, for the other modules of ``kinesis_src.aws`` (e.g. :mod:`.fanout`)."""
        if self._client is None:
            raise RuntimeError("AsyncKinesisClient is not open: use `async with AsyncKinesisClient(...)`")
        return self._client

    def fan_out(self) -> AsyncFanOut:
        """:meth:`KinesisClient.fan_out`, async: on this open client."""
        from .async_fanout import AsyncFanOut  # noqa: PLC0415  (on use: most callers never fan out)

        return AsyncFanOut(self)

    async def describe_stream(self, stream: str) -> StreamSummary:
        what = f"DescribeStreamSummary of stream {stream!r}"
        try:
            out = await self._call(what, lambda: self._client.describe_stream_summary(StreamName=stream))
        except ResourceNotFoundError as exc:
            raise self._stream_not_found(stream) from exc
        return stream_summary(out)

    async def get_shard_iterator(self, stream: str, shard_id: str, position: Position) -> str:
        what = f"GetShardIterator({position}) on shard {shard_id} of stream {stream!r}"
        try:
            out = await self._call(
                what,
                lambda: self._client.get_shard_iterator(
                    StreamName=stream, ShardId=shard_id, **position.iterator_args()
                ),
            )
        except ResourceNotFoundError as exc:
            raise await self._stream_or_shard_missing(stream, shard_id) from exc
        return str(out["ShardIterator"])

    async def list_shards(self, stream: str, page_size: int = 1000) -> list[dict[str, Any]]:
        """Every page of ListShards (:func:`.kinesis.shard_listing_plan`): the whole stream."""
        pages = itertools.count(1)

        async def page(request: Call) -> Any:
            try:
                return await self._call(f"ListShards of stream {stream!r} (page {next(pages)})",
                                        lambda: request.on(self._client))
            except ResourceNotFoundError as exc:
                raise self._stream_not_found(stream) from exc

        return await adrive(shard_listing_plan({"StreamName": stream, "MaxResults": page_size}, page_size), page)

    async def put_record(self, stream: str, partition_key: str, data: bytes) -> dict[str, Any]:
        """PutRecord (the Consumer's dead letters)."""
        return await self._call(
            f"PutRecord to stream {stream!r}",
            lambda: self._client.put_record(StreamName=stream, PartitionKey=partition_key, Data=data),
        )

    async def get_records(self, iterator: str, limit: int, shard_id: str, stream: str) -> RecordPage:
        what = f"GetRecords on shard {shard_id} of stream {stream!r}"
        try:
            if self._direct is not None:
                return await self._call(what, lambda: self._direct_page(iterator, limit))
            out = await self._call(
                what, lambda: self._client.get_records(ShardIterator=iterator, Limit=limit)
            )
        except ResourceNotFoundError as exc:
            raise await self._stream_or_shard_missing(stream, shard_id) from exc
        return page_of(out)

    async def _direct_page(self, iterator: str, limit: int) -> RecordPage:
        assert self._direct is not None
        return decode_get_records(await self._direct.get_records(iterator, limit))

    def _stream_not_found(self, stream: str) -> StreamNotFoundError:
        return stream_not_found(stream, self.endpoint, self.settings.region)

    async def _stream_or_shard_missing(self, stream: str, shard_id: str) -> ResourceNotFoundError:
        try:
            await self.describe_stream(stream)
        except StreamNotFoundError as missing:
            return missing
        return shard_not_found(stream, shard_id, self.endpoint)


def _keys_of(session: AioSession) -> Callable[[], Awaitable[Keys | None]]:
    """The session's current credentials (refreshed as botocore refreshes them), as signing keys."""

    async def keys() -> Keys | None:
        credentials = await session.get_credentials()
        if credentials is None:
            return None
        frozen = await credentials.get_frozen_credentials()
        return Keys(frozen.access_key, frozen.secret_key, frozen.token)

    return keys
