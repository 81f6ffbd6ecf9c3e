"""One ordering mode per application and stream, recorded in the lease table by the first worker.

Workers of one application that processed a stream in different modes would
break each other's promise: a ``"key"`` worker keeps a key's records in
order only if the worker before it on the shard did too. So the first
``process()`` of an application on a stream records its mode with a
put-if-absent item in a partition of its own (``processing#<application>#<stream>``,
range key ``ordering``), and every later worker compares: the same mode
passes, another mode fails before anything is read, naming the first mode.

To change an application's mode: stop every worker, delete that item
(``aws dynamodb delete-item``), start the workers with the new mode. The item
stays otherwise; it is one small item per application and stream.
"""

from __future__ import annotations

from ...aws import DynamoDBClient
from ...errors import ConfigurationError
from ...leases.serializer import HASH_KEY, RANGE_KEY
from .options import Ordering

ORDERING_RANGE_KEY = "ordering"
ORDERING_ATTRIBUTE = "ordering"
CLAIMED_BY_ATTRIBUTE = "workerId"


def ordering_key(application: str, stream: str) -> dict[str, dict[str, str]]:
    return {HASH_KEY: {"S": f"processing#{application}#{stream}"}, RANGE_KEY: {"S": ORDERING_RANGE_KEY}}


def claim_ordering(
    dynamodb: DynamoDBClient, table: str, application: str, stream: str, ordering: Ordering, worker_id: str
) -> None:
    """Record ``ordering`` for (application, stream), or check it against the one recorded first."""
    item = {
        **ordering_key(application, stream),
        ORDERING_ATTRIBUTE: {"S": ordering.value},
        CLAIMED_BY_ATTRIBUTE: {"S": worker_id},
    }
    result = dynamodb.put_item(table, item, "attribute_not_exists(#pk)", names={"#pk": HASH_KEY})
    if result.ok:
        return
    stored = result.item or dynamodb.get_item(table, ordering_key(application, stream)) or {}
    first = stored.get(ORDERING_ATTRIBUTE, {}).get("S")
    if first == ordering.value:
        return
    by = stored.get(CLAIMED_BY_ATTRIBUTE, {}).get("S", "an earlier worker")
    raise ConfigurationError(
        f"ordering={ordering.value!r} conflicts with ordering={first!r}, which application {application!r} "
        f"already uses on stream {stream!r} (recorded by {by} in lease table {table!r}, item "
        f"processing#{application}#{stream}). Every worker of one application must use the same ordering: "
        f"pass ordering={first!r}, or stop every worker and delete that item to change the mode"
    )
