"""Gradients side by side: the adjoint hl.propagate_adjoints derives for a small image model (a
3x3 convolution with learned weights, a tanh, a squared-error loss against a target), run by
pyhalide unscheduled and autoscheduled, by the real Halide (its own propagate_adjoints, run as it
leaves them), and by numpy written by hand. Each computes d loss / d input and d loss /
d weights; outputs are checked against numpy before anything is timed, variants are timed in
alternating rounds. Not a test.

    python -m benchmarks.autodiff [--width W] [--height H] [--rounds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from benchmarks.harness import _halide, _threads


def build(hl, image: np.ndarray, target: np.ndarray, weights: np.ndarray, keep: list):
    """The model in module hl (pyhalide or halide): the loss and its two adjoints."""
    for a in (image, target, weights):
        keep.append(a)
    inp, tgt, w = hl.Buffer(image, "inp"), hl.Buffer(target, "tgt"), hl.Buffer(weights, "w")
    x, y = hl.Var("x"), hl.Var("y")
    padded = hl.BoundaryConditions.constant_exterior(inp, 0.0)
    k = hl.RDom([(0, 3), (0, 3)])
    conv = hl.Func("conv")
    conv[x, y] = 0.0
    conv[x, y] += padded[x + k.x - 1, y + k.y - 1] * w[k.x, k.y]
    act = hl.Func("act")
    act[x, y] = hl.tanh(conv[x, y])
    h, wd = image.shape
    r = hl.RDom([(0, wd), (0, h)])
    loss = hl.Func("loss")
    loss[()] = 0.0
    diff = act[r.x, r.y] - tgt[r.x, r.y]
    loss[()] += diff * diff
    d = hl.propagate_adjoints(loss)
    return d[inp], d[w]


def numpy_gradients(image, target, weights):
    h, wd = image.shape
    p = np.pad(image, 1)
    conv = sum(p[j:j + h, i:i + wd] * weights[j, i] for j in range(3) for i in range(3))
    act = np.tanh(conv)
    d_conv = 2 * (act - target) * (1 - act * act)
    d_p = np.zeros_like(p)
    for j in range(3):
        for i in range(3):
            d_p[j:j + h, i:i + wd] += d_conv * weights[j, i]
    d_w = np.array([[np.sum(d_conv * p[j:j + h, i:i + wd]) for i in range(3)] for j in range(3)], np.float32)
    return d_p[1:-1, 1:-1], d_w


def _median_ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--width", type=int, default=1536)
    parser.add_argument("--height", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--halide", action="store_true",
                        help="also time the real Halide's adjoints as its propagate_adjoints leaves them (slow: "
                             "50 s at 128x96 on 2 cores)")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    os.environ.setdefault("HL_NUM_THREADS", "2")
    import pyhalide as hl

    rng = np.random.default_rng(0)
    image = rng.random((args.height, args.width), dtype=np.float32)
    target = rng.random((args.height, args.width), dtype=np.float32)
    weights = rng.normal(0, 0.3, (3, 3)).astype(np.float32)
    want_inp, want_w = numpy_gradients(image, target, weights)
    sizes = [args.width, args.height]
    keep: list = []
    variants = {"numpy": lambda: numpy_gradients(image, target, weights)}
    compile_s = {}

    def add(name, module, d_inp, d_w):
        """Both gradients as one Pipeline (they share the forward pass), realized into buffers."""
        pipeline = module.Pipeline([d_inp, d_w])
        outs = [module.Buffer(module.Float(32), sizes), module.Buffer(module.Float(32), [3, 3])]
        t0 = time.perf_counter()
        pipeline.compile_jit()
        compile_s[name] = time.perf_counter() - t0
        pipeline.realize(outs)
        np.testing.assert_allclose(np.asarray(outs[0]), want_inp, rtol=2e-3, atol=2e-3, err_msg=name)
        np.testing.assert_allclose(np.asarray(outs[1]), want_w, rtol=2e-3, atol=1e-1, err_msg=name)
        variants[name] = lambda: pipeline.realize(outs)
        return pipeline

    add("pyhalide-naive", hl, *build(hl, image, target, weights, keep))
    d_inp, d_w = build(hl, image, target, weights, keep)
    d_inp.set_estimates([(0, args.width), (0, args.height)])
    d_w.set_estimates([(0, 3), (0, 3)])
    params = hl.AutoschedulerParams("Adams2019", {"parallelism": _threads()})
    t0 = time.perf_counter()
    hl.Pipeline([d_inp, d_w]).apply_autoscheduler(hl.Target("host"), params)
    search_s = time.perf_counter() - t0
    add("pyhalide-auto", hl, d_inp, d_w)
    halide = _halide() if args.halide else None
    if halide is not None:
        # Halide's propagate_adjoints schedules some adjoints itself (compute_root), which its
        # autoschedulers then refuse: its adjoints run as propagate_adjoints leaves them
        add("halide-default", halide, *build(halide, image, target, weights, keep))
    results = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            results[name].append(_median_ms(fn, 1))
    medians = {name: statistics.median(ts) for name, ts in results.items()}
    base = medians["numpy"]
    print(f"d loss / d input and d loss / d weights, {args.width}x{args.height} float32, "
          f"{os.environ['HL_NUM_THREADS']} threads (pyhalide autoscheduler search: {search_s:.1f} s)")
    print(f"{'variant':<18} {'median ms':>10} {'vs numpy':>9} {'compile s':>10}")
    for name, ms in medians.items():
        print(f"{name:<18} {ms:>10.2f} {base / ms:>8.2f}x {compile_s.get(name, 0.0):>10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"width": args.width, "height": args.height, "median_ms": medians, "compile_s": compile_s,
                       "search_s": search_s}, f, indent=1)


if __name__ == "__main__":
    main()
