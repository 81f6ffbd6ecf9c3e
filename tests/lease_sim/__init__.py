"""A discrete-event simulation of the lease protocol that drives the real coordinator code.

Real :class:`~kinesis_src.leases.coordinator.LeaseCoordinator`,
:class:`~kinesis_src.leases.table.LeaseTable`, schema, assignment,
:class:`~kinesis_src.aws.dynamodb.DynamoDBClient` and retry policy run
unchanged on top of a simulated DynamoDB (latency, per-partition-key
throttling, capacity accounting) in simulated time. Modules:
:mod:`.events` (clock and agenda), :mod:`.fiber` (a worker's code as a
coroutine), :mod:`.expressions` and :mod:`.dynamodb` (the table),
:mod:`.capacity` (sizes, units, buckets), :mod:`.client` (the wire),
:mod:`.workers` (a worker process), :mod:`.safety` (the checker),
:mod:`.simulation` (phases and figures).
"""

from .simulation import PhaseResult, SimConfig, Simulation

__all__ = ["PhaseResult", "SimConfig", "Simulation"]
