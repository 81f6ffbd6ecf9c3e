"""The one retrieval layer: a pure shard cursor, moved by polling and enhanced fan-out drivers.

* :mod:`.aggregation` turns KPL aggregated records into user records.
* :mod:`.cursor` owns a shard's position (sequence and sub-sequence number),
  de-aggregation, stop reasons, pacing and the caught-up judgement; no I/O.
* Drivers move a cursor: :mod:`.polling` (sync GetRecords, Spark tasks and
  bounded reads), :mod:`.async_polling` (the Consumer) and :mod:`.fanout`
  (SubscribeToShard, both).
"""
