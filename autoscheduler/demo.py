"""The main job: auto-schedule a gallery app and print its time beside numpy, the default schedule
and the expert's hand schedule.

    python -m autoscheduler.demo [APP] [--size small|default]

Every variant's output is checked against the app's numpy reference before it is timed.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HL_NUM_THREADS", str(os.cpu_count() or 1))


def main(argv=None) -> None:
    import pyhalide as hl
    from apps import NAMES, load
    from apps.common import median_seconds

    from .api import auto_schedule

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("app", nargs="?", default="harris", choices=NAMES)
    p.add_argument("--size", default="default", choices=["small", "default"])
    args = p.parse_args(argv)
    app = load(args.app)
    inputs = app.inputs(args.size)
    expected = app.reference(inputs)
    t_np, _ = median_seconds(lambda: app.reference(inputs), repeats=3)
    rows = [("numpy", t_np, "")]

    def timed(label, schedule, note=""):
        built = app.build(hl, inputs)
        note = schedule(built) or note
        if not app.check(app.realize(hl, built), expected):
            raise SystemExit(f"{label}: wrong result")
        t, _ = median_seconds(app.runner(hl, built))
        rows.append((label, t, note))

    if not app.default_schedule_is_slow:
        timed("pyhalide, default schedule", lambda b: None)

    def auto(built):
        mins = built.output_mins or [0] * len(built.output_sizes)
        r = auto_schedule(built.output, estimates={built.output.name(): list(zip(mins, built.output_sizes))})
        return f"searched {r.stats['search_s']:.2f} s"

    timed("pyhalide, auto-scheduled", auto)
    timed("pyhalide, hand schedule", lambda b: app.schedule(hl, b))
    print(f"{app.name}: {app.description} ({os.environ['HL_NUM_THREADS']} threads; outputs checked)")
    t_auto = next(t for label, t, _ in rows if label.endswith("auto-scheduled"))
    for label, t, note in rows:
        if label.endswith("auto-scheduled"):
            compare = ""
        elif t >= t_auto:
            compare = f"auto is {t / t_auto:5.2f}x faster"
        else:
            compare = f"auto is {t_auto / t:5.2f}x slower"
        print(f"  {label:28s} {t * 1e3:9.2f} ms  {compare:22s} {note}")


if __name__ == "__main__":
    main()
