"""Start a kinesis-src application from a KCL 2.x/3.x lease table, its checkpoints carried over.

The KCL table is only read; before writing anything the import refuses what it cannot carry over
safely (docs/migration.md, "From KCL", "What is refused")."""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from lineage import ShardGraph, shard_sort_key

from ..aws import KinesisClient
from ..aws.dynamodb_scan import ScanningDynamoDBClient
from ..aws.kinesis import StreamSummary
from ..config import AwsSettings, CredentialSource
from ..discovery import ShardDiscovery
from ..names import default_table_name, validate_name, validate_table_name
from .kcl_checks import check_quiet, check_stream, leases_of_stream
from .kcl_items import (
    KCL_KEY_SCHEMA,
    UNSTARTED,
    ImportTargetInUseError,
    KclCheckpointKind,
    KclImportError,
    KclItemReader,
    KclLease,
    NotAKclLeaseTableError,
    SkippedItem,
    checkpoint_for,
)
from .model import Checkpoint, CheckpointKind, Lease
from .stream_binding import bind_stream
from .table import LeaseTable

log = logging.getLogger(__name__)

DEFAULT_OBSERVE_S = 20.0


class ImportAction(str, enum.Enum):
    IMPORT = "import"  # a lease is (or would be) created
    PRESENT = "present"  # an earlier, interrupted import created it already, with this checkpoint
    TRIMMED = "trimmed"  # no longer listed: past retention, nothing left to read


@dataclass(frozen=True)
class ImportedShard:
    """One KCL lease and what became of it."""

    shard_id: str
    kcl_checkpoint: str
    kcl_sub_sequence_number: int
    action: ImportAction
    checkpoint: Checkpoint | None  # ours; None when not imported
    parent_shard_ids: tuple[str, ...] = ()
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "shardId": self.shard_id, "kclCheckpoint": self.kcl_checkpoint,
            "kclSubSequenceNumber": self.kcl_sub_sequence_number, "action": self.action.value,
            "checkpoint": None if self.checkpoint is None else str(self.checkpoint),
            "parentShardIds": list(self.parent_shard_ids), "note": self.note,
        }


@dataclass(frozen=True)
class KclImportReport:
    """What an import did, or with ``dry_run`` would do."""

    kcl_table: str
    stream: str
    application: str
    lease_table: str
    dry_run: bool
    shards: tuple[ImportedShard, ...]
    skipped_items: tuple[SkippedItem, ...]
    left_to_shard_sync: tuple[str, ...]  # listed shards without a KCL lease: leased at TRIM_HORIZON later
    created: tuple[str, ...]  # empty on a dry run
    observed_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "kclTable": self.kcl_table, "stream": self.stream, "application": self.application,
            "leaseTable": self.lease_table, "dryRun": self.dry_run,
            "shards": [s.to_dict() for s in self.shards],
            "skippedItems": [{"leaseKey": s.key, "what": s.what} for s in self.skipped_items],
            "leftToShardSync": list(self.left_to_shard_sync), "created": list(self.created),
            "observedSeconds": self.observed_s,
        }


@dataclass(frozen=True)
class _Read:
    leases: dict[str, KclLease]
    skipped: tuple[SkippedItem, ...]


class KclImport:
    """One import, on given clients (:func:`import_kcl_table` builds them from settings)."""

    def __init__(
        self, dynamodb: ScanningDynamoDBClient, kinesis: KinesisClient, kcl_table: str, stream: str,
        application: str, *, lease_table_name: str | None = None, observe_s: float = DEFAULT_OBSERVE_S,
        unstarted: Checkpoint | None = None, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.dynamodb, self.kinesis = dynamodb, kinesis
        self.kcl_table = validate_table_name(kcl_table)
        self.stream = validate_name(stream, "stream")
        self.application = validate_name(application, "application")
        self.lease_table_name = validate_table_name(lease_table_name or default_table_name(application))
        if self.lease_table_name == self.kcl_table:
            raise KclImportError(f"the lease table to write, {self.lease_table_name!r}, is the KCL table itself: "
                                 "the KCL table is only read; name another lease table (or leave it to the default)")
        if not observe_s > 0:
            raise KclImportError(f"observe_s must be > 0 (at least twice the KCL application's failoverTimeMillis), "
                                 f"got {observe_s}")
        self.observe_s = observe_s
        self.unstarted = unstarted or Checkpoint.trim_horizon()
        if self.unstarted.kind not in (CheckpointKind.TRIM_HORIZON, CheckpointKind.AT_TIMESTAMP):
            raise KclImportError("unstarted must be Checkpoint.trim_horizon() or Checkpoint.at_timestamp(...)")
        self.sleep = sleep
        self.reader = KclItemReader(self.kcl_table)

    def run(self, dry_run: bool = False) -> KclImportReport:
        self._check_schema()
        summary = self.kinesis.describe_stream(self.stream)
        discovery = ShardDiscovery(self.kinesis, self.stream)
        discovery.refresh()
        graph = discovery.graph
        first = self._read()
        self._for_stream(first, summary, graph)  # a wrong table fails before the wait
        self.sleep(self.observe_s)
        last = self._read()
        check_quiet(self.kcl_table, first.leases, last.leases, self.observe_s)
        leases = self._for_stream(last, summary, graph)
        plan = self._plan(leases, graph)
        table = LeaseTable(self.dynamodb, self.lease_table_name, self.application, self.stream)
        shards, created = self._write(table, summary, plan, dry_run)
        log.info("KCL import %s->%s (application %r, stream %r): %d lease(s) %s", self.kcl_table,
                 self.lease_table_name, self.application, self.stream, len(plan),
                 "would be created (dry run)" if dry_run else f"checked, {len(created)} created")
        return KclImportReport(
            self.kcl_table, self.stream, self.application, self.lease_table_name, dry_run, shards,
            last.skipped, _left_to_sync(graph, leases), created, self.observe_s,
        )

    def _for_stream(self, read: _Read, summary: StreamSummary, graph: ShardGraph) -> list[KclLease]:
        """The read's leases of this stream, checked against its listing (raises KclStreamMismatchError)."""
        leases = leases_of_stream(self.kcl_table, read.leases.values(), summary)
        check_stream(self.kcl_table, self.stream, leases, graph)
        return leases

    # -- reading the KCL table ----------------------------------------------------------

    def _check_schema(self) -> None:
        description = self.dynamodb.describe_table(self.kcl_table)
        if description is None:
            raise KclImportError(f"KCL table {self.kcl_table!r} does not exist at {self.dynamodb.endpoint}: "
                                 "--kcl-table is the KCL application's lease table (named after its applicationName)")
        if tuple(description.key_schema) != KCL_KEY_SCHEMA:
            found = ", ".join(f"{name} {kind} ({typ})" for name, kind, typ in description.key_schema)
            raise NotAKclLeaseTableError(
                f"DynamoDB table {self.kcl_table!r} has key schema [{found}], but a KCL lease table has "
                "[leaseKey HASH (S)]: --kcl-table must name a KCL 2.x/3.x application's lease table"
            )

    def _read(self) -> _Read:
        leases: dict[str, KclLease] = {}
        skipped: list[SkippedItem] = []
        for item in self.dynamodb.scan(self.kcl_table):
            read = self.reader.read(item)
            if isinstance(read, SkippedItem):
                skipped.append(read)
            else:
                leases[read.lease_key] = read
        if not leases:
            raise NotAKclLeaseTableError(
                f"DynamoDB table {self.kcl_table!r} holds no KCL lease ({len(skipped)} other item(s)): check "
                "--kcl-table, and that the KCL application has run on the stream"
            )
        return _Read(leases, tuple(sorted(skipped, key=lambda s: s.key)))

    # -- our leases -----------------------------------------------------------------------

    def _plan(self, leases: list[KclLease], graph: ShardGraph) -> list[tuple[KclLease, Lease | None]]:
        """Each KCL lease with our lease for it (None: its shard was trimmed), parents first."""
        plan = []
        for kcl in sorted(leases, key=lambda l: shard_sort_key(l.shard_id)):
            if kcl.shard_id not in graph:
                plan.append((kcl, None))
                continue
            checkpoint = checkpoint_for(kcl, self.unstarted)
            lease = Lease.for_shard(graph.shard(kcl.shard_id), checkpoint)
            if checkpoint.is_shard_end:
                children = set(kcl.child_shard_ids) | set(graph.children(kcl.shard_id))
                lease = replace(lease, child_shard_ids=tuple(sorted(children, key=shard_sort_key)))
            plan.append((kcl, lease))
        return plan

    def _write(
        self, table: LeaseTable, summary: StreamSummary, plan: list[tuple[KclLease, Lease | None]], dry_run: bool
    ) -> tuple[tuple[ImportedShard, ...], tuple[str, ...]]:
        exists = self.dynamodb.describe_table(self.lease_table_name) is not None
        if exists or not dry_run:
            table.ensure_table(create=not dry_run)
        present = self._present(table, plan) if exists else set()
        created: list[str] = []
        if not dry_run:
            if summary.identity is not None:
                bind_stream(table, summary.identity)
            table.ensure_layout(expected_leases=len(plan))
            for kcl, lease in plan:
                if lease is not None and kcl.shard_id not in present and table.create_lease(lease):
                    created.append(lease.shard_id)
        shards = tuple(self._shard(kcl, lease, kcl.shard_id in present) for kcl, lease in plan)
        return shards, tuple(created)

    def _present(self, table: LeaseTable, plan: list[tuple[KclLease, Lease | None]]) -> set[str]:
        """Leases an interrupted import already created; anything else there is refused."""
        planned = {lease.shard_id: lease for _, lease in plan if lease is not None}
        present = set()
        for lease in table.list_leases():
            wanted = planned.get(lease.shard_id)
            if wanted is None or wanted.checkpoint != lease.checkpoint or lease.owner is not None:
                raise ImportTargetInUseError(
                    f"lease table {table.table_name!r} already holds leases of application {self.application!r} on "
                    f"stream {self.stream!r} ({lease.describe()}), which this import did not write: import into "
                    "a new application name (--application), or delete that application's items for this "
                    f"stream (partition keys starting lease#{self.application}#{self.stream}) while it is stopped"
                )
            present.add(lease.shard_id)
        return present

    def _shard(self, kcl: KclLease, lease: Lease | None, present: bool) -> ImportedShard:
        action = ImportAction.TRIMMED if lease is None else ImportAction.PRESENT if present else ImportAction.IMPORT
        return ImportedShard(
            kcl.shard_id, kcl.checkpoint, kcl.sub_sequence_number, action,
            None if lease is None else lease.checkpoint,
            () if lease is None else lease.parent_shard_ids, self._note(kcl, lease),
        )

    def _note(self, kcl: KclLease, lease: Lease | None) -> str:
        notes = []
        if lease is None:
            notes.append("no longer listed (trimmed past retention): not imported")
            if kcl.kind is not KclCheckpointKind.SHARD_END:
                notes.append("records after its checkpoint were never processed and are gone")
        elif kcl.kind in UNSTARTED:
            notes.append(f"KCL {kcl.kind.value}: nothing processed yet, starts at {lease.checkpoint}")
        if kcl.pending_checkpoint:
            notes.append(f"KCL pending checkpoint {kcl.pending_checkpoint} (prepared, never committed) ignored")
        return "; ".join(notes)


def _left_to_sync(graph: ShardGraph, leases: list[KclLease]) -> tuple[str, ...]:
    """Listed shards with no KCL lease and no KCL-leased descendant: the shard sync leases them at TRIM_HORIZON."""
    leased = {l.shard_id for l in leases}
    return tuple(s for s in graph.shard_ids()
                 if s not in leased and not any(d in leased for d in graph.descendants(s)))


def import_kcl_table(
    kcl_table: str, stream: str, application: str, *, dry_run: bool = False,
    lease_table_name: str | None = None, observe_s: float = DEFAULT_OBSERVE_S, unstarted: Checkpoint | None = None,
    region: str | None = None, endpoint_url: str | None = None, dynamodb_endpoint_url: str | None = None,
    credentials: CredentialSource | None = None,
) -> KclImportReport:
    """Import a stopped KCL application's checkpoints into ``application``'s lease table; a
    :class:`kinesis_src.Consumer` with ``application_name=application`` then resumes every shard
    after them. ``unstarted``: where shards KCL never started (LATEST, AT_TIMESTAMP) begin,
    TRIM_HORIZON by default. Raises :class:`~.kcl_items.KclImportError` (or
    :class:`~.kcl_items.KclApplicationRunningError`) naming the fix, and then writes nothing."""
    extra: dict[str, Any] = {} if credentials is None else {"credentials": credentials}
    settings = AwsSettings.from_env(region, endpoint_url, dynamodb_endpoint_url, **extra)
    job = KclImport(
        ScanningDynamoDBClient(settings), KinesisClient(settings), kcl_table, stream, application,
        lease_table_name=lease_table_name, observe_s=observe_s, unstarted=unstarted,
    )
    return job.run(dry_run=dry_run)
