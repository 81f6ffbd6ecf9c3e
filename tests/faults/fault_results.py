"""What one scenario run counted (:class:`Result`) and its verdict; the campaign table is made of these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    scenario: str
    engine: str
    fault: str
    produced: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    dup_acked: int = 0      # consumer: deliveries of a record after an earlier delivery of it was acknowledged
    acked_twice: int = 0    # consumer: records whose checkpoint succeeded after two different deliveries
    out_of_order: int = 0
    recover_s: float | None = None
    catchup_s: float | None = None
    injected: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    order_required: bool = True

    @property
    def ok(self) -> bool:
        return (self.lost == 0 and self.dup_acked == 0 and self.acked_twice == 0 and not self.failures
                and (self.engine == "consumer" or self.duplicated == 0)
                and (self.out_of_order == 0 or not self.order_required) and self.produced > 0)

    @property
    def verdict(self) -> str:
        if self.produced == 0:
            return "ERROR"
        if self.lost:
            return "LOST"
        if self.acked_twice or (self.engine == "spark" and self.duplicated):
            return "DUPLICATED"
        if self.failures:
            return "FAILED"
        if self.out_of_order and self.order_required:
            return "ORDER"
        if self.dup_acked:
            return "REDELIVERED"
        return "ok"

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "verdict": self.verdict}
