"""The gallery's GPU hand schedules on a CUDA GPU, side by side with cuBLAS and cuDNN.

    python -m benchmarks.gpu [APP ...] --json PATH

For each app with a `gpu_schedule` (and each of its `gpu_variants`, other hand schedules measured
beside it): the output is checked against the app's reference, then
inputs and output stay on the device (copy_to_device) and the pipeline is realized repeatedly;
reported are the median time per realize (host to host, launch overheads included) and the
kernels' own time from CUDA events, with GB/s (blur: bytes read and written once) or TFLOP/s
(gemm, conv_layer). gemm is 4096^3 float32 against torch.matmul (cuBLAS) or CuPy; conv_layer
against torch conv2d + relu (cuDNN), where those are installed. The device's copy bandwidth is
measured with a device-to-device copy for the blur target (80% of it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import traceback

import numpy as np

GPU_APPS = ["blur", "gemm", "conv_layer", "bilateral_grid", "harris", "unsharp", "max_filter", "histogram_equalize",
            "local_laplacian", "camera_pipe"]


def _median_ms(fn, rounds: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _check(app, got, want) -> bool:
    if app.exact:
        return bool(np.array_equal(got, want))
    return bool(np.allclose(got, want, rtol=max(app.rtol, 1e-3), atol=max(app.atol, 1e-3)))


def run_app(name: str, rounds: int, size: str = "gpu", variant: str | None = None) -> dict:
    import apps
    import pyhalide as hl
    from pyhalide.codegen.gpu_runtime import cuda_device

    app = apps.load(name)
    inputs = app.inputs(size)
    built = app.build(hl, inputs)
    app.apply_gpu_schedule(hl, built, variant)
    # As the CPU harness does: apps compared within a tolerance may contract multiply-adds (FMA)
    target = hl.Target("host-cuda" if app.exact else "host-cuda-fp_contract")
    t0 = time.perf_counter()
    built.output.compile_jit(target)
    compile_s = time.perf_counter() - t0
    got = app.realize(hl, built)
    correct = _check(app, got, app.reference(inputs))
    for b in built.output._pipeline()._lower().buffers:  # keep the inputs on the device
        if not b.is_output:
            b.source.copy_to_device()
    out = hl.Buffer(built.output_type, list(built.output_sizes))
    if built.output_mins:
        out.set_min(list(built.output_mins))
    out.copy_to_device()
    device = cuda_device()

    def run():
        built.output.realize(out)

    ms = _median_ms(run, rounds)
    device.profiling, device.kernel_ms = True, {}
    for _ in range(rounds):
        run()
    device.profiling = False
    kernel_ms = sum(device.kernel_ms.values()) / rounds
    rec = {"app": name, "schedule": variant or "gpu_schedule", "device": device.name, "correct": correct,
           "compile_s": round(compile_s, 3),
           "median_ms": round(ms, 4), "kernel_ms": round(kernel_ms, 4),
           "kernels": {k: round(v / rounds, 4) for k, v in device.kernel_ms.items()}}
    if name == "blur":
        moved = inputs["input"].nbytes + got.nbytes
        rec["gb_per_s"] = round(moved / kernel_ms / 1e6, 1)
    if hasattr(app, "flops"):
        rec["tflops"] = round(app.flops(inputs) / kernel_ms / 1e9, 2)
    return rec


def ptxas_counts(capabilities=(80, 90)) -> dict:
    """Registers, spills and shared memory of every gallery GPU kernel, per architecture, from
    ptxas (no GPU needed): the record the CUDA tests check against the limits."""
    import apps
    import pyhalide as hl
    from pyhalide.codegen.gpu_runtime import compile_ptx, ptxas_report

    out = {}
    for name in GPU_APPS:
        app = apps.load(name)
        built = app.build(hl, app.inputs("gpu"))
        app.gpu_schedule(hl, built)
        source = hl.Pipeline([built.output]).cuda_source(hl.Target("host-cuda"))
        for cap in capabilities:
            report = ptxas_report(compile_ptx(source, cap), cap)
            out[f"{name} sm_{cap}"] = {k: {"registers": r.registers, "spill_stores": r.spill_stores,
                                           "spill_loads": r.spill_loads, "shared_bytes": r.shared_bytes,
                                           "stack_bytes": r.stack_bytes} for k, r in sorted(report.items())}
    return out


def sass_mix(capability: int = 90) -> dict:
    """Per gallery GPU schedule (and variant) and kernel: its instruction mix in the machine code
    for sm_<capability> (no GPU needed; cuobjdump and nvdisasm from `pip install
    'pyhalide[cuda-tools]'` or a CUDA toolkit): the count of each opcode, memory
    instructions with their width (LDG.128: a 16-byte global load). What the GPU runs, to read
    beside measured times, and to compare schedules where no GPU is lent."""
    import collections
    import os
    import re
    import shutil
    import subprocess
    import sysconfig
    import tempfile
    from pathlib import Path

    import apps
    import pyhalide as hl
    from pyhalide.codegen.gpu_runtime import compile_cubin

    wheel_bin = Path(sysconfig.get_paths()["purelib"]) / "nvidia/cu13/bin"
    path = f"{wheel_bin}:{os.environ.get('PATH', '')}"
    if shutil.which("cuobjdump", path=path) is None or shutil.which("nvdisasm", path=path) is None:
        raise SystemExit("--sass needs cuobjdump and nvdisasm: pip install 'pyhalide[cuda-tools]'")
    out = {}
    for name in GPU_APPS:
        app = apps.load(name)
        for variant in [None, *app.gpu_variants]:
            built = app.build(hl, app.inputs("gpu"))
            app.apply_gpu_schedule(hl, built, variant)
            target = hl.Target("host-cuda" if app.exact else "host-cuda-fp_contract")
            source = hl.Pipeline([built.output]).cuda_source(target)
            with tempfile.TemporaryDirectory() as tmp:
                cubin = Path(tmp) / "k.cubin"
                cubin.write_bytes(compile_cubin(source, capability, not app.exact))
                sass = subprocess.run([shutil.which("cuobjdump", path=path), "-sass", str(cubin)], capture_output=True,
                                      text=True, check=True, env={"PATH": path}).stdout
            kernels = {}
            for text in re.split(r"\n\s+Function : ", sass)[1:]:
                ops = collections.Counter()
                for line in re.findall(r"/\*[0-9a-f]{4}\*/\s+(.*?);", text):
                    op = re.sub(r"^@!?U?P\w+\s+", "", line).split()[0]
                    parts = op.split(".")
                    widths = [q for q in parts[1:] if q in ("64", "128", "U8", "S8", "U16", "S16")]
                    # memory instructions keep their width (not their cache hints), others their name
                    op = ".".join([parts[0], *widths]) if parts[0] in ("LDG", "STG", "LDS", "STS", "LDL", "STL") \
                        else parts[0]
                    ops[op] += 1
                kernels[text.splitlines()[0].strip()] = {"instructions": sum(ops.values()), **dict(ops.most_common())}
            out[f"{name} {variant or 'gpu_schedule'} sm_{capability}"] = kernels
    return out


def vendor_baselines(rounds: int, size: str = "gpu") -> dict:
    """cuBLAS gemm and cuDNN conv_layer through PyTorch (or CuPy for gemm), kernel time only."""
    import apps

    out = {}
    try:
        import torch

        if not torch.cuda.is_available():
            raise ImportError
        gemm = apps.load("gemm")
        ins = gemm.inputs(size)
        a, b = (torch.from_numpy(ins[k]).cuda() for k in ("A", "B"))
        out["gemm_cublas_ms"] = _torch_ms(torch, lambda: torch.matmul(a, b), rounds)
        out["gemm_cublas_tflops"] = round(gemm.flops(ins) / out["gemm_cublas_ms"] / 1e9, 2)
        conv = apps.load("conv_layer")
        ins = conv.inputs(size)
        x = torch.from_numpy(np.ascontiguousarray(ins["input"].transpose(0, 3, 1, 2))).cuda()
        w = torch.from_numpy(np.ascontiguousarray(ins["filter"].transpose(3, 0, 1, 2))).cuda()
        bias = torch.from_numpy(ins["bias"]).cuda()
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        out["conv_layer_cudnn_ms"] = _torch_ms(
            torch, lambda: torch.relu(torch.nn.functional.conv2d(x, w, bias)), rounds)
        n = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        m = torch.empty_like(n)
        copy_ms = _torch_ms(torch, lambda: m.copy_(n), rounds)
        out["copy_gb_per_s"] = round(2 * n.numel() / copy_ms / 1e6, 1)
    except ImportError:
        try:
            import cupy

            gemm = apps.load("gemm")
            ins = gemm.inputs(size)
            a, b = cupy.asarray(ins["A"]), cupy.asarray(ins["B"])
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            cupy.matmul(a, b)
            start.record()
            for _ in range(rounds):
                cupy.matmul(a, b)
            stop.record()
            stop.synchronize()
            out["gemm_cublas_ms"] = cupy.cuda.get_elapsed_time(start, stop) / rounds
            out["gemm_cublas_tflops"] = round(gemm.flops(ins) / out["gemm_cublas_ms"] / 1e9, 2)
        except ImportError:
            out["note"] = "neither torch with CUDA nor cupy is installed: no vendor baselines"
    return out


def _torch_ms(torch, fn, rounds: int) -> float:
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rounds):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / rounds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("apps", nargs="*", help=f"apps (default: {', '.join(GPU_APPS)})")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--size", default="gpu", help="input sizes (gpu: the benchmark's; small: a smoke test)")
    parser.add_argument("--ptxas", metavar="PATH", help="only write the kernels' ptxas counts (no GPU needed) here")
    parser.add_argument("--sass", metavar="PATH", help="only write the kernels' instruction mix (no GPU needed) here")
    args = parser.parse_args(argv)
    if args.ptxas or args.sass:
        with open(args.ptxas or args.sass, "w") as f:
            json.dump(ptxas_counts() if args.ptxas else sass_mix(), f, indent=1)
        return
    results = {"apps": [], "vendor": {}}
    import apps

    for name in args.apps or GPU_APPS:
        for variant in [None, *apps.load(name).gpu_variants]:
            try:
                rec = run_app(name, args.rounds, args.size, variant)
            except Exception as e:  # noqa: BLE001 - one schedule failing is a result, not the end of the run
                rec = {"app": name, "schedule": variant or "gpu_schedule", "error": f"{type(e).__name__}: {e}",
                       "traceback": traceback.format_exc()[-2000:]}
            print(json.dumps(rec), flush=True)
            results["apps"].append(rec)
    results["vendor"] = vendor_baselines(args.rounds, args.size)
    print(json.dumps(results["vendor"]))
    by = {}  # each app's fastest correct schedule
    for r in results["apps"]:
        if r.get("correct") and ("kernel_ms" not in by.get(r["app"], {}) or r["kernel_ms"] < by[r["app"]]["kernel_ms"]):
            by[r["app"]] = r
    v = results["vendor"]
    if "gemm" in by and "kernel_ms" in by["gemm"] and "gemm_cublas_ms" in v:
        print(f"gemm ({by['gemm']['schedule']}): {v['gemm_cublas_ms'] / by['gemm']['kernel_ms']:.2f}x cuBLAS's speed "
              "(target 0.5x)")
    if "blur" in by and "gb_per_s" in by["blur"] and "copy_gb_per_s" in v:
        print(f"blur ({by['blur']['schedule']}): {by['blur']['gb_per_s'] / v['copy_gb_per_s']:.0%} of the copy "
              "bandwidth (target 80%)")
    if "conv_layer" in by and "kernel_ms" in by["conv_layer"] and "conv_layer_cudnn_ms" in v:
        conv = by["conv_layer"]
        print(f"conv_layer ({conv['schedule']}): {v['conv_layer_cudnn_ms'] / conv['kernel_ms']:.2f}x cuDNN's speed "
              "(target 0.5x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
