#!/usr/bin/env bash
# Every GPU test and GPU benchmark in one run, for a machine with an NVIDIA GPU (about 5 minutes:
# all ten apps and their variants),
# then the CPU gallery on all of its cores and on one. Needs what the repository and the machine
# provide (numpy, llvmlite, and pycuda or cuda-bindings, NVRTC or nvcc; torch or cupy for
# cuBLAS/cuDNN); wheels in .whl/ (say, llvmlite for a machine whose own is older) are installed
# into a private folder first. With Halide's tutorial in $HALIDE_TUTORIAL (a folder holding
# lesson_12_using_the_gpu.py, importing pyhalide, with CUDA among its targets), lesson 12 runs too.
# CPU_GALLERY=0 skips the gallery. Writes under $OUT: env.json, gpu_tests.log, lesson_12.log,
# gpu_bench.json and .log, cpu_gallery_N.json and .log (N threads); the compile cache stays out of it.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/pyhalide_site \
    .whl/*.whl && export PYTHONPATH=/tmp/pyhalide_site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export PYHALIDE_CACHE_DIR="${PYHALIDE_CACHE_DIR:-/tmp/pyhalide_gpu_check_cache}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1

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

echo "== GPU tests (pytest -m gpu: kernels on the device)"
timeout 150 "$PY" -m pytest -p no:cacheprovider -m gpu -rs tests/test_gpu.py tests/test_gpu_fuzz.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
echo "== Halide's GPU tests, ported (pytest -m gpu)"
timeout 150 "$PY" -m pytest -p no:cacheprovider -m gpu -rs tests/test_halide_gpu_*.py tests/test_float16.py tests/test_require.py tests/test_prefetch.py 2>&1 \
  | tee "$OUT/halide_gpu_tests.log" | tail -20

if [ -n "${HALIDE_TUTORIAL:-}" ]; then
  echo "== Halide's lesson 12 on the GPU"
  (cd "$HALIDE_TUTORIAL" && timeout 45 "$PY" lesson_12_using_the_gpu.py) 2>&1 | tee "$OUT/lesson_12.log" | tail -20
fi

echo "== GPU benchmarks"
timeout 180 "$PY" -m benchmarks.gpu --json "$OUT/gpu_bench.json" 2>&1 | tee "$OUT/gpu_bench.log" | cut -c1-400

[ "${CPU_GALLERY:-1}" = 0 ] && exit 0
echo "== CPU gallery on $(nproc) cores, then pyhalide alone on one"
for threads in "$(nproc)" 1; do
  variants=$([ "$threads" = 1 ] && echo pyhalide-hand || echo pyhalide-hand,numpy,halide-hand)
  HL_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads \
    timeout $([ "$threads" = 1 ] && echo 60 || echo 90) "$PY" -m benchmarks --variants "$variants" --rounds 3 --json "$OUT/cpu_gallery_$threads.json" \
    >"$OUT/cpu_gallery_$threads.log" 2>&1
  grep -E "^machine|^[a-z_]+$|pyhalide-hand" "$OUT/cpu_gallery_$threads.log"
done
