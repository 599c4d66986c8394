"""What a process pays for Ember before its program does anything.

    dev/env python benches/startup_cost.py [--runs R]

Runs, interleaved, R fresh processes of each of:

* `interp`: `python -c pass`, Ember not imported;
* `import`: `python -c "import ember"`: loading Ember's extension module and
  its Python half, Ember not enabled;
* `EMBER=1`: `python -c pass` with Ember turned on at start-up (what every
  `EMBER=1` process pays: the import, checking the configuration, installing
  the evaluator, and Ember's share of the exit);
* `first compile`: `EMBER=1`, then `ember._ember._compile` of two small
  functions, timed in the process: the first pays for setting the compiler
  up (stencil symbols, the region header, the arena's first region, each
  stencil's program the first time it is used), the second does not.

Prints the median wall and CPU time (user + system) of the first three
kinds of process and their difference to `interp`, and the median
in-process times of the two compilations (the fourth kind's own process
time is not comparable: its program imports and defines more). Ember is snapshotted as for run.py. A process varies by a
millisecond or more from one run to the next on a shared machine: the
default of 60 runs gives medians to a few tenths of a millisecond.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "site"))

import run  # noqa: E402

COMPILE = """
import json, time, ember
def f(n):
    for i in range(n):
        pass
def g(n):
    total = 0
    for i in range(n):
        total += i
    return total
t0 = time.perf_counter_ns()
ember._ember._compile(f.__code__)
t1 = time.perf_counter_ns()
ember._ember._compile(g.__code__)
t2 = time.perf_counter_ns()
print(json.dumps([t1 - t0, t2 - t1]))
"""

KINDS = {
    "interp": ({}, ["-c", "pass"]),
    "import": ({}, ["-c", "import ember"]),
    "EMBER=1": ({"EMBER": "1"}, ["-c", "pass"]),
    "first compile": ({"EMBER": "1"}, ["-c", COMPILE]),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="processes of each kind (default 60)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    build = run.snapshot_ember()
    if run.EMBER_SNAPSHOT is None:
        sys.exit(f"Ember is not importable here: {build}")
    try:
        measure(args.runs, build)
    finally:
        # The snapshot is this run's own copy (about 15 MB).
        shutil.rmtree(run.EMBER_SNAPSHOT, ignore_errors=True)


def measure(runs: int, build: dict) -> None:
    base = {k: v for k, v in os.environ.items()
            if not (k.startswith("EMBER") and not k.startswith("EMBER_DEV_")) and k != "PYTHON_JIT"}
    base["PYTHONPATH"] = run.EMBER_SNAPSHOT
    names = list(KINDS)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in names}
    compiles: list[list[int]] = []
    for r in range(runs):
        # A different kind first in each round: none always runs after the same one.
        for name in names[r % len(names):] + names[:r % len(names)]:
            extra, argv = KINDS[name]
            env = dict(base, **extra)
            t0 = time.perf_counter()
            p = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.PIPE, text=True)
            out = p.stdout.read()
            _, status, usage = os.wait4(p.pid, 0)
            wall = time.perf_counter() - t0
            if status != 0:
                sys.exit(f"{name}: process failed (wait status {status})")
            times[name].append((wall, usage.ru_utime + usage.ru_stime))
            if name == "first compile":
                compiles.append(json.loads(out))
    print(f"Ember: {build.get('ember_source')} (snapshot {run.EMBER_SNAPSHOT}); {runs} processes of each kind\n")
    print("| process | wall (median) | vs interp | CPU (median) | vs interp |")
    print("|---|---:|---:|---:|---:|")
    ref_wall = statistics.median(w for w, _ in times["interp"])
    ref_cpu = statistics.median(c for _, c in times["interp"])
    for name in names[:3]:
        wall = statistics.median(w for w, _ in times[name])
        cpu = statistics.median(c for _, c in times[name])
        print(f"| {name} | {wall * 1e3:.2f} ms | {(wall - ref_wall) * 1e3:+.2f} ms | "
              f"{cpu * 1e3:.2f} ms | {(cpu - ref_cpu) * 1e3:+.2f} ms |")
    first = statistics.median(c[0] for c in compiles)
    second = statistics.median(c[1] for c in compiles)
    print(f"\nIn the `first compile` processes: the first compilation {first / 1e3:.0f} us, "
          f"the second {second / 1e3:.0f} us (medians).")


if __name__ == "__main__":
    main()
