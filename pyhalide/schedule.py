"""Schedules as plain data: where each Func is computed and stored, and how each stage loops.

Schedule calls on Funcs and Stages only record data here; lowering reads it. The same records
serialise to JSON for the tuning database.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# compute levels: "default" (inline if pure, else root), "inline", "root"
DEFAULT, INLINE, ROOT = "default", "inline", "root"


@dataclass
class StageSchedule:
    """How one stage's loops are arranged. Empty means the default loop nest."""

    directives: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"directives": list(self.directives)}


@dataclass
class FuncSchedule:
    compute_level: str = DEFAULT
    stages: list[StageSchedule] = field(default_factory=lambda: [StageSchedule()])

    def reset_stages(self, n: int) -> None:
        while len(self.stages) < n:
            self.stages.append(StageSchedule())

    def to_json(self) -> dict:
        return {"compute_level": self.compute_level, "stages": [s.to_json() for s in self.stages]}
