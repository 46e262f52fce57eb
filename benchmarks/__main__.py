"""python -m benchmarks [APP ...] --json PATH --plot PATH"""

import os

# Same thread count everywhere (pyhalide, Halide, OpenBLAS, PyTorch), set before they load.
for _var in ("HL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "2")

from benchmarks.harness import main  # noqa: E402

if __name__ == "__main__":  # pyhalide-tuned measures in spawned processes, which import this module
    main()
