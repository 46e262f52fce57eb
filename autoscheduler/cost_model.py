"""The cost model: predicted seconds as an interpretable formula over the loop-nest features.

time = sum over Funcs, over features k, of weight_k * feature_k

Each weight is a cost per unit of one feature (seconds per vector instruction, per byte moved,
per parallel launch ...), non-negative, learned from measured (schedule, time) pairs of random
pipelines by `python -m autoscheduler.train`. A formula rather than a black box: it extrapolates
to pipelines unlike the training data, and `explain` says where the predicted time goes.

Weights are JSON (never pickle), stamped with the feature version they were trained for; weights
of another version are refused and the defaults (rough costs for a current x86 core) are used.
"""

from __future__ import annotations

import json
from pathlib import Path

from .loop_nest import FEATURE_VERSION, FEATURES

WEIGHTS_PATH = Path(__file__).with_name("weights.json")

# Rough costs per unit on a ~3 GHz x86 core, used until a model is trained. Per-realization
# costs (allocs, stages) are those the training runs on random pipelines measure: a few ns.
DEFAULT_WEIGHTS = {
    "ops": 0.12e-9,  # three to four vector instructions a cycle
    "expensive": 2e-9,
    "loads": 0.2e-9,  # two loads a cycle, from L1
    # (the measured figures: `python -m benchmarks.unit_costs`, one thread, AVX-512 Zen 5)
    # a lane's load at a data-dependent index costs what a scalar load does (a 256-entry table
    # read per lane: 0.23-0.28 ns an element, vectorized or not); a histogram's read-modify-write
    # of a bin per lane is dearer: 0.6 ns with the bins in L1, about 2 ns in a vectorized tile of
    # bilateral_grid's histogram, whose bins and strided pixels spill to L2
    "gathers": 0.3e-9,
    "scatters": 1.5e-9,
    "stores": 0.3e-9,
    "bytes_l1": 0.01e-9,
    # a line buffer in L2 streams at L1's cost: a 3-row window of 12 KB to 768 KB, written and
    # read back per pixel, ran at 0.28-0.35 ns a pixel at one thread (AVX-512 Zen 5)
    "bytes_cache": 0.012e-9,
    "bytes_l3": 0.06e-9,
    "bytes_mem": 0.08e-9,  # about 12 GB/s per core
    # bytes from L3 or memory walked a piece of each row at a time cost about twice as much:
    # a copy of a 2560x1536 float image tiled any way ran 1.7-1.9x its row-by-row time
    "bytes_partial_rows": 0.015e-9,
    "allocs": 3e-9,
    "loop_entries": 2e-9,
    "par_launches": 5e-6,
    # a task of a parallel loop: blur's register blocks in 320 strips ran 17 us slower than in 40
    # (2 threads: 0.06 us a task); fitted to the random pipelines' measurements, 0.058-0.065 us
    "par_tasks": 0.06e-6,
    "stages": 3e-9,
}


class CostModel:
    def __init__(self, weights: dict | None = None, source: str = "defaults"):
        self.weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
        self.source = source
        self._vector = [float(self.weights.get(k, 0.0)) for k in FEATURES]

    def predict(self, features: dict) -> float:
        return sum(w * features[k] for w, k in zip(self._vector, FEATURES))

    def explain(self, features: dict) -> dict:
        """Seconds per feature, the largest first (features that cost nothing are left out)."""
        parts = {k: self.weights.get(k, 0.0) * features[k] for k in FEATURES}
        return dict(sorted(((k, v) for k, v in parts.items() if v > 0), key=lambda kv: -kv[1]))

    def to_json(self) -> str:
        return json.dumps({"feature_version": FEATURE_VERSION, "features": list(FEATURES),
                           "weights": self.weights, "source": self.source}, indent=1, sort_keys=True)

    @staticmethod
    def from_json(text: str, source: str = "") -> CostModel:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("feature_version") != FEATURE_VERSION:
            version = data.get("feature_version") if isinstance(data, dict) else "?"
            raise ValueError(f"weights for feature version {version}, this featurisation is version {FEATURE_VERSION}")
        weights = data.get("weights")
        if not isinstance(weights, dict) or set(weights) != set(FEATURES):
            raise ValueError("weights must name exactly the features " + ", ".join(FEATURES))
        for k, v in weights.items():
            if not isinstance(v, int | float) or v < 0 or v != v:
                raise ValueError(f"weight {k} must be a non-negative number, got {v!r}")
        return CostModel({k: float(v) for k, v in weights.items()}, source or data.get("source", ""))

    @staticmethod
    def load(path: str | Path | None = None) -> CostModel:
        """The weights shipped with the package (or those at `path`); the defaults when there are
        none for this featurisation."""
        p = Path(path) if path is not None else WEIGHTS_PATH
        try:
            return CostModel.from_json(p.read_text(), str(p))
        except (OSError, ValueError):
            if path is not None:
                raise
            return CostModel()
