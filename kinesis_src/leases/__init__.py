"""Leases, by role (after the KCL's ``leases`` package).

* :mod:`.model` -- values: :class:`Checkpoint`, :class:`Lease`, worker heartbeats;
* :mod:`.schema` -- every key, item layout and attribute name of the table;
* :mod:`.layout` -- over which partition keys the leases are spread (:mod:`.layout_records` records it);
* :mod:`.table` -- the conditional writes (:class:`LeaseTable`), with :mod:`.heartbeat_items` and
  :mod:`.shard_end`;
* :mod:`.assignment` -- the pure balancer;
* :mod:`.expiry` -- the one judge of "has this heartbeat stopped";
* :mod:`.coordinator` -- a worker's loops (:class:`LeaseCoordinator`): :mod:`.renewal` (the heartbeat,
  on its own schedule), :mod:`.view` (what a cycle reads), :mod:`.ownership` (take, steal, release),
  :mod:`.cycle_report`;
* :mod:`.shard_sync` -- the table follows the stream's lineage;
* :mod:`.progress_store` -- the Spark source's per-batch ends;
* :mod:`.claim` -- one running Spark query per application;
* :mod:`.kcl_import` -- start an application from a stopped KCL application's lease table
  (:mod:`.kcl_items` reads its items, :mod:`.kcl_checks` refuses what cannot be imported).
"""

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
