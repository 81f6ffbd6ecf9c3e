"""The AWS boundary: the only package that imports botocore."""

from .boundary import call, client_config, new_session, translate
from .kinesis import KinesisClient, StreamSummary

__all__ = ["KinesisClient", "StreamSummary", "call", "client_config", "new_session", "translate"]
