"""Leases, by role (after the KCL's ``leases`` package): the table and its schema, the balancer,
a worker's coordinator, shard sync, Spark progress, the query claim and the KCL import.

Which module does what: docs/leases.md (its opening) and docs/architecture.md."""

from .assignment import AssignmentPlan, is_assignable, plan_assignment
from .coordinator import CycleReport, LeaseCoordinator
from .kcl_import import ImportAction, ImportedShard, KclImportReport, import_kcl_table
from .kcl_items import (
    ImportTargetInUseError,
    KclApplicationRunningError,
    KclImportError,
    KclStreamMismatchError,
    NotAKclLeaseTableError,
)
from .listener import LeaseListener
from .model import Checkpoint, CheckpointKind, HeartbeatStatus, Lease, WorkerHeartbeat
from .progress_store import ProgressStore, ShardProgress
from .shard_sync import ShardSync
from .table import LeaseTable
from .timing import LeaseTiming

__all__ = [
    "AssignmentPlan",
    "Checkpoint",
    "CheckpointKind",
    "CycleReport",
    "HeartbeatStatus",
    "ImportAction",
    "ImportTargetInUseError",
    "ImportedShard",
    "KclApplicationRunningError",
    "KclImportError",
    "KclImportReport",
    "KclStreamMismatchError",
    "Lease",
    "LeaseCoordinator",
    "LeaseListener",
    "LeaseTable",
    "LeaseTiming",
    "NotAKclLeaseTableError",
    "ProgressStore",
    "ShardProgress",
    "ShardSync",
    "WorkerHeartbeat",
    "import_kcl_table",
    "is_assignable",
    "plan_assignment",
]
