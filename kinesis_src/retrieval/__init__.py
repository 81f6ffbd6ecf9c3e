"""The one retrieval layer: a pure shard cursor (:mod:`.cursor`), moved by polling and EFO drivers.

Sync drivers serve Spark and bounded reads; async ones (:mod:`.async_polling`, ...) the Consumer."""
