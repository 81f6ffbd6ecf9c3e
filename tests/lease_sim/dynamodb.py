"""A simulated DynamoDB table: botocore-shaped requests in, botocore-shaped answers or ClientErrors out.

It sits *below* kinesis-src's real :class:`~kinesis_src.aws.dynamodb.DynamoDBClient`
(see :mod:`.client`), so the real LeaseTable, schema, error translation
and retry policy all run: a failed condition is a
``ConditionalCheckFailedException`` carrying the old item (ALL_OLD), a
cancelled transaction a ``TransactionCanceledException`` with one reason per
action, and a throttled request a ``ProvisionedThroughputExceededException``,
exactly the shapes botocore raises. Conditions and updates are evaluated
by :mod:`.expressions`; capacity is charged and throttled by :mod:`.capacity`.

Items are never mutated in place (every write stores a new dict), so answers
can hand out the stored dicts without copying.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from botocore.exceptions import ClientError

from . import expressions
from .capacity import Ledger, item_size, read_units, write_units

Item = dict[str, dict[str, Any]]
QUERY_PAGE_BYTES = 1024 * 1024
WriteHook = Callable[[str, str, "Item | None", "Item | None"], None]


def _error(operation: str, code: str, message: str = "", **extra: Any) -> ClientError:
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}, **extra}
    return ClientError(response, operation)


@dataclass
class _Partition:
    """The items under one partition key, sorted by sort key."""

    items: dict[str, Item] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)

    def put(self, sk: str, item: Item) -> None:
        if sk not in self.items:
            bisect.insort(self.keys, sk)
        self.items[sk] = item
        self.sizes[sk] = item_size(item)

    def delete(self, sk: str) -> None:
        if self.items.pop(sk, None) is not None:
            del self.sizes[sk]
            del self.keys[bisect.bisect_left(self.keys, sk)]


@dataclass(frozen=True)
class _Write:
    """A write worked out but not yet applied: applied only if capacity admits it."""

    pk: str
    sk: str
    new: Item | None  # None: delete
    units: float


class SimDynamoDB:
    """One table (hash key ``pk``, range key ``sk``), with capacity, throttling and write hooks.

    ``ignore_condition`` is fault injection for the checker's own test: a
    predicate (operation, request) -> True makes the table apply that write
    without evaluating its condition.
    """

    def __init__(self, ledger: Ledger, now: Callable[[], float], hash_key: str = "pk", range_key: str = "sk",
                 ignore_condition: Callable[[str, Mapping[str, Any]], bool] | None = None) -> None:
        self.ledger = ledger
        self.now = now
        self.hash_key = hash_key
        self.range_key = range_key
        self.ignore_condition = ignore_condition
        self.partitions: dict[str, _Partition] = {}
        self.write_hooks: list[WriteHook] = []
        self._committed_tokens: set[str] = set()
        self.last_page_bytes = 0  # size of the last Query page (the network's transfer time)

    # -- direct access (set-up and checks; not charged) ----------------------------------

    def load(self, item: Item) -> None:
        pk, sk = self._key(item)
        self.partitions.setdefault(pk, _Partition()).put(sk, item)

    def items(self, pk: str) -> list[Item]:
        part = self.partitions.get(pk)
        return [] if part is None else [part.items[sk] for sk in part.keys]

    # -- the operations, by botocore method name ------------------------------------------

    def execute(self, method: str, request: Mapping[str, Any]) -> dict[str, Any]:
        return getattr(self, "_" + method)(request)

    def _get_item(self, req: Mapping[str, Any]) -> dict[str, Any]:
        pk, sk = self._key(req["Key"])
        item = self._get(pk, sk)
        self._charge("GetItem", reads={pk: read_units(item_size(item))})
        return {} if item is None else {"Item": item}

    def _put_item(self, req: Mapping[str, Any]) -> dict[str, Any]:
        new = dict(req["Item"])
        pk, sk = self._key(new)
        old = self._get(pk, sk)
        units = write_units(max(item_size(old), item_size(new)))
        self._check("PutItem", req, old, {pk: units})
        self._apply(_Write(pk, sk, new, units), "PutItem")
        return {}

    def _update_item(self, req: Mapping[str, Any]) -> dict[str, Any]:
        pk, sk = self._key(req["Key"])
        old = self._get(pk, sk)
        new = self._updated(req, old)
        units = write_units(max(item_size(old), item_size(new)))
        self._check("UpdateItem", req, old, {pk: units})
        self._apply(_Write(pk, sk, new, units), "UpdateItem")
        return {"Attributes": new} if req.get("ReturnValues") == "ALL_NEW" else {}

    def _delete_item(self, req: Mapping[str, Any]) -> dict[str, Any]:
        pk, sk = self._key(req["Key"])
        old = self._get(pk, sk)
        units = write_units(item_size(old))
        self._check("DeleteItem", req, old, {pk: units})
        self._apply(_Write(pk, sk, None, units), "DeleteItem")
        return {}

    def _query(self, req: Mapping[str, Any]) -> dict[str, Any]:
        names, values = req.get("ExpressionAttributeNames", {}), req.get("ExpressionAttributeValues", {})
        text = req["KeyConditionExpression"]
        pk = self._query_partition(text, names, values)
        part = self.partitions.get(pk, _Partition())
        match = expressions.condition(text)
        start = req.get("ExclusiveStartKey")
        index = 0 if start is None else bisect.bisect_right(part.keys, start[self.range_key]["S"])
        page: list[Item] = []
        read = 0
        last: str | None = None
        limit = req.get("Limit")
        for sk in part.keys[index:]:
            item = part.items[sk]
            if not match(item, names, values):
                continue
            if (read + part.sizes[sk] > QUERY_PAGE_BYTES and page) or (limit is not None and len(page) >= limit):
                last = page[-1][self.range_key]["S"]
                break
            page.append(item)
            read += part.sizes[sk]
        self._charge("Query", reads={pk: read_units(read)})
        self.last_page_bytes = read
        out: dict[str, Any] = {"Items": _project(page, req.get("ProjectionExpression"), names), "Count": len(page)}
        if last is not None:
            out["LastEvaluatedKey"] = {self.hash_key: {"S": pk}, self.range_key: {"S": last}}
        return out

    def _transact_write_items(self, req: Mapping[str, Any]) -> dict[str, Any]:
        token = req.get("ClientRequestToken")
        if token is not None and token in self._committed_tokens:  # a retry of one that landed
            self.ledger.record(self.now(), "TransactWriteItems")
            return {}
        writes, reasons, failed_items = [], [], []
        for action in req["TransactItems"]:
            (kind, body), = action.items()
            write, reason, old = self._transact_action(kind, body)
            writes.append(write)
            reasons.append(reason)
            failed_items.append(old)
        units: dict[str, float] = {}
        for write in writes:
            units[write.pk] = units.get(write.pk, 0) + 2 * write.units
        if not self.ledger.admit(self.now(), {}, units):
            self.ledger.throttle(self.now(), "TransactWriteItems")
            raise _error("TransactWriteItems", "TransactionCanceledException", "throttled",
                         CancellationReasons=[{"Code": "ThrottlingError"} for _ in writes])
        cancelled = any(r != "None" for r in reasons)
        self.ledger.record(self.now(), "TransactWriteItems", wcu=sum(units.values()), condition_failed=cancelled)
        if cancelled:
            raise _error(
                "TransactWriteItems", "TransactionCanceledException", "Transaction cancelled",
                CancellationReasons=[
                    {"Code": r, **({"Item": o} if r != "None" and o is not None else {})}
                    for r, o in zip(reasons, failed_items)
                ],
            )
        for write in writes:
            if write.new is not False:
                self._store(write)
        if token is not None:
            self._committed_tokens.add(token)
        return {}

    def _transact_action(self, kind: str, body: Mapping[str, Any]) -> tuple[_Write, str, Item | None]:
        key = body["Item"] if kind == "Put" else body["Key"]
        pk, sk = self._key(key)
        old = self._get(pk, sk)
        if kind == "Put":
            new: Any = dict(body["Item"])
        elif kind == "Update":
            new = self._updated(body, old)
        elif kind == "Delete":
            new = None
        elif kind == "ConditionCheck":
            new = False  # nothing written
        else:
            raise _error("TransactWriteItems", "ValidationException", f"unknown action {kind}")
        units = write_units(max(item_size(old), item_size(new or None)))
        ok = self._condition_holds(kind, body, old)
        return _Write(pk, sk, new, units), "None" if ok else "ConditionalCheckFailed", old

    def _batch_write_item(self, req: Mapping[str, Any]) -> dict[str, Any]:
        writes: list[_Write] = []
        for requests in req["RequestItems"].values():
            for entry in requests:
                if "DeleteRequest" in entry:
                    pk, sk = self._key(entry["DeleteRequest"]["Key"])
                    writes.append(_Write(pk, sk, None, write_units(item_size(self._get(pk, sk)))))
                else:
                    item = dict(entry["PutRequest"]["Item"])
                    pk, sk = self._key(item)
                    writes.append(_Write(pk, sk, item, write_units(max(item_size(item), item_size(self._get(pk, sk))))))
        units: dict[str, float] = {}
        for write in writes:
            units[write.pk] = units.get(write.pk, 0) + write.units
        if not self.ledger.admit(self.now(), {}, units):
            self.ledger.throttle(self.now(), "BatchWriteItem")
            raise _error("BatchWriteItem", "ProvisionedThroughputExceededException", "throttled")
        self.ledger.record(self.now(), "BatchWriteItem", wcu=sum(units.values()))
        for write in writes:
            self._store(write)
        return {"UnprocessedItems": {}}

    # -- helpers ----------------------------------------------------------------------------

    def _key(self, item: Mapping[str, Any]) -> tuple[str, str]:
        return item[self.hash_key]["S"], item[self.range_key]["S"]

    def _get(self, pk: str, sk: str) -> Item | None:
        part = self.partitions.get(pk)
        return None if part is None else part.items.get(sk)

    def _updated(self, req: Mapping[str, Any], old: Item | None) -> Item:
        base = dict(old) if old is not None else dict(req["Key"])
        try:
            return expressions.update(req["UpdateExpression"])(
                base, req.get("ExpressionAttributeNames", {}), req.get("ExpressionAttributeValues", {})
            )
        except expressions.ExpressionError as exc:
            raise _error("UpdateItem", "ValidationException", str(exc)) from None

    def _condition_holds(self, operation: str, req: Mapping[str, Any], old: Item | None) -> bool:
        text = req.get("ConditionExpression")
        if not text or (self.ignore_condition is not None and self.ignore_condition(operation, req)):
            return True
        names, values = req.get("ExpressionAttributeNames", {}), req.get("ExpressionAttributeValues", {})
        return expressions.condition(text)(old or {}, names, values)

    def _check(self, operation: str, req: Mapping[str, Any], old: Item | None, units: Mapping[str, float]) -> None:
        """Throttle, or charge and raise ConditionalCheckFailed (a failed condition still pays)."""
        if not self.ledger.admit(self.now(), {}, units):
            self.ledger.throttle(self.now(), operation)
            raise _error(operation, "ProvisionedThroughputExceededException", "throttled")
        if not self._condition_holds(operation, req, old):
            self.ledger.record(self.now(), operation, wcu=sum(units.values()), condition_failed=True)
            extra = {"Item": old} if old is not None and req.get("ReturnValuesOnConditionCheckFailure") else {}
            raise _error(operation, "ConditionalCheckFailedException", "The conditional request failed", **extra)

    def _apply(self, write: _Write, operation: str) -> None:
        self.ledger.record(self.now(), operation, wcu=write.units)
        self._store(write)

    def _store(self, write: _Write) -> None:
        part = self.partitions.setdefault(write.pk, _Partition())
        old = part.items.get(write.sk)
        if write.new is None:
            part.delete(write.sk)
        else:
            part.put(write.sk, write.new)
        for hook in self.write_hooks:
            hook(write.pk, write.sk, old, write.new)

    def _charge(self, operation: str, reads: Mapping[str, float]) -> None:
        if not self.ledger.admit(self.now(), reads, {}):
            self.ledger.throttle(self.now(), operation)
            raise _error(operation, "ProvisionedThroughputExceededException", "throttled")
        self.ledger.record(self.now(), operation, rcu=sum(reads.values()))

    def _query_partition(self, text: str, names: Mapping[str, str], values: Mapping[str, Any]) -> str:
        """The partition key a KeyConditionExpression names (its ``#h = :h`` part)."""
        for part in text.split(" AND "):
            left, _, right = (s.strip() for s in part.partition("="))
            if names.get(left, left) == self.hash_key and right.startswith(":"):
                return values[right]["S"]
        raise _error("Query", "ValidationException", f"no equality on {self.hash_key} in {text!r}")


def _project(items: list[Item], projection: str | None, names: Mapping[str, str]) -> list[Item]:
    if not projection:
        return items
    wanted = [names.get(p.strip(), p.strip()) for p in projection.split(",")]
    return [{k: item[k] for k in wanted if k in item} for item in items]
