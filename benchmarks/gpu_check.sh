#!/usr/bin/env bash
# Every GPU test and GPU benchmark in one run, for a machine with an NVIDIA GPU (under 5 minutes),
# then the CPU gallery on all of its cores. Needs only what the repository and the machine provide
# (numpy, llvmlite, and pycuda or cuda-bindings, NVRTC or nvcc; torch or cupy for cuBLAS/cuDNN).
# Writes $OUT/env.json, gpu_tests.log, gpu_bench.json and cpu_gallery.json ($OUT: ./gpu_check_out).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export PYHALIDE_CACHE_DIR="${PYHALIDE_CACHE_DIR:-$OUT/cache}"
PY=${PYTHON:-python3}

"$PY" - <<'PYEOF' | tee "$OUT/env.json"
import importlib, json, os, shutil, sys
have = {}
for name in ("numpy", "llvmlite", "pycuda", "cuda.bindings", "torch", "cupy", "halide", "hypothesis", "tqdm"):
    try:
        m = importlib.import_module(name)
        have[name] = getattr(m, "__version__", "yes")
    except Exception as e:  # noqa: BLE001
        have[name] = f"missing ({type(e).__name__})"
from pyhalide.codegen import gpu_runtime
reason = gpu_runtime.cuda_unavailable_reason()
device = None if reason else gpu_runtime.cuda_device()
print(json.dumps({"python": sys.version.split()[0], "cores": os.cpu_count(), "packages": have,
                  "nvcc": shutil.which("nvcc"), "nvrtc": gpu_runtime._nvrtc() is not None,
                  "device": None if device is None else device.name,
                  "capability": getattr(device, "capability", None), "unavailable": reason}, indent=1))
PYEOF

echo "== GPU tests (kernels on the device, plus the CPU-side CUDA tests)"
timeout 150 "$PY" -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -25

echo "== GPU benchmarks"
timeout 150 "$PY" -m benchmarks.gpu --json "$OUT/gpu_bench.json" 2>&1 | tail -12

echo "== CPU gallery on $(nproc) cores"
HL_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=$(nproc) OMP_NUM_THREADS=$(nproc) \
  timeout 150 "$PY" -m benchmarks --variants pyhalide-hand,numpy,halide-hand --rounds 3 \
  --json "$OUT/cpu_gallery.json" 2>&1 | tail -60
