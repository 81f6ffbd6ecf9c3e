"""moto in-process, for tests whose code under test calls it from several threads at once.

moto's in-process backends are not thread-safe: a Query deep-copies the
items while another thread's UpdateItem changes one of them, and fails with
"dictionary changed size during iteration" (seen with a Consumer on moto:
each unit's lease coordinator and renewal thread call DynamoDB at once).
A real DynamoDB serves concurrent calls, so the tests serialize moto's
request handling instead of the code under test's calls.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any
from unittest import mock

from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

_ONE_AT_A_TIME = threading.RLock()
_handle = BotocoreStubber.__call__


def _serialized(self: BotocoreStubber, event_name: str, request: Any, **kwargs: Any) -> Any:
    with _ONE_AT_A_TIME:
        return _handle(self, event_name, request, **kwargs)


@contextlib.contextmanager
def serialized_mock_aws() -> Iterator[None]:
    """``mock_aws()``, with moto handling one request at a time across threads."""
    with mock.patch.object(BotocoreStubber, "__call__", _serialized), mock_aws():
        yield
