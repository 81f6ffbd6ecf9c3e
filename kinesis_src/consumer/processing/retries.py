"""How long a failed record waits before its next delivery: capped exponential backoff with jitter.

Per record, on a timer, blocking only the record's own key (or shard, in ``"shard"`` ordering);
unlike the per-call AWS retries of :mod:`kinesis_src.retry`, which block their caller."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ...errors import ConfigurationError


@dataclass(frozen=True)
class Backoff:
    """Delay before the n-th retry: ``initial_s * multiplier**(n-1)``, capped at ``max_s``, with full
    jitter down to half of it (so records that failed together do not retry together)."""

    initial_s: float = 0.1
    max_s: float = 30.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        finite = all(math.isfinite(v) for v in (self.initial_s, self.max_s, self.multiplier))
        if not finite or not 0 <= self.initial_s <= self.max_s or self.multiplier < 1:
            raise ConfigurationError(
                "retry_backoff must be finite numbers with 0 <= initial_s <= max_s and multiplier >= 1, got "
                f"initial_s={self.initial_s}, max_s={self.max_s}, multiplier={self.multiplier}"
            )

    def delay_s(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry number ``retry`` (1 for the first retry)."""
        return self.ceiling_s(retry) * (0.5 + 0.5 * (rng or random).random())

    def ceiling_s(self, retry: int) -> float:
        """The capped delay before jitter, for any retry count: worked out in logarithms, so a huge
        count gives ``max_s`` instead of an OverflowError from ``multiplier ** n``."""
        steps = max(0, retry - 1)
        growth = math.log(self.multiplier)
        if self.initial_s == 0 or growth <= 0:
            return self.initial_s
        room = math.log(self.max_s) - math.log(self.initial_s)  # log of how many times initial_s fits in max_s
        if steps >= room / growth:  # an int against a float: exact, whatever the size of ``steps``
            return self.max_s
        return min(self.max_s, math.exp(math.log(self.initial_s) + steps * growth))
