"""What a PEP 523 evaluator costs per Python call, by configuration.

    dev/env python benches/hookcost.py [--configs interp,passthrough,ember] [--calls N]
                                       [--runs R] [--callgrind VALGRIND] [--top K]

Runs a tiny loop (--workload call: one Python-to-Python call per iteration,
nothing else; gen: one generator resumption per iteration) in fresh processes
under each configuration of benches/site/ebench.py.

* Timing (default): R interleaved processes per configuration, each timing
  N calls in-process after a warm-up; prints the median ns per call and the
  difference to interp and to passthrough.
* --callgrind PATH: runs each configuration under callgrind (PATH is the
  valgrind program: `valgrind`, which the amd64 environment has) at N and
  2N calls; the difference
  of the two runs, divided by N, is the instruction count per call without
  start-up. Also prints which functions account for the difference between
  consecutive configurations (self cost, instructions per call).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "site"))

import ebench  # noqa: E402
import run  # noqa: E402
from run import child_env  # noqa: E402

LOOPS = {
    # one Python-to-Python call per iteration
    "call": r"""
def f(x):
    return x + 1
def loop(n):
    s = 0
    for i in range(n):
        s = f(s)
    return s
""",
    # one generator resumption per iteration
    "gen": r"""
def g(n):
    for i in range(n):
        yield i
def loop(n):
    s = 0
    for x in g(n):
        s += x
    return s
""",
}

DRIVER = r"""
import sys, time
n = int(sys.argv[1])
timed = sys.argv[2] == "time"
if timed:
    loop(100_000)                    # warm-up: specialisation, JIT traces
    t0 = time.perf_counter()
loop(n)
if timed:
    print((time.perf_counter() - t0) / n * 1e9)
"""
LOOP = LOOPS["call"] + DRIVER


def run_loop(config: str, args: list[str], prefix: list[str] = ()) -> str:
    env, _ = child_env(config, None)
    cmd = [*prefix, sys.executable, "-c", LOOP, *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"hookcost: {config} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def timing(configs: list[str], calls: int, runs: int) -> None:
    ns = collections.defaultdict(list)
    for r in range(runs):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for c in order:
            ns[c].append(float(run_loop(c, [str(calls), "time"])))
        print(f"  run {r + 1}/{runs}: " + ", ".join(f"{c} {ns[c][-1]:.1f}" for c in configs), flush=True)
    med = {c: statistics.median(v) for c, v in ns.items()}
    print(f"\nns per call (median of {runs} processes, {calls:,} calls each):")
    for c in configs:
        q = statistics.quantiles(ns[c], n=4) if runs >= 2 else (med[c], 0, med[c])
        rel = "".join(f"  {'+' if med[c] >= med[b] else ''}{med[c] - med[b]:.1f} vs {b}"
                      for b in ("interp", "passthrough") if b in med and b != c)
        print(f"  {c:12} {med[c]:7.1f} ns  (IQR {q[0]:.1f}–{q[2]:.1f}){rel}")


_FN = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")


def self_costs(path: str) -> dict[str, int]:
    """Exclusive Ir per function from a callgrind output file."""
    names: dict[str, str] = {}
    cost: dict[str, int] = collections.Counter()
    fn = None
    skip_next = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if skip_next:
                skip_next = False
                continue
            m = _FN.match(line.rstrip("\n"))
            if m:
                kind, ident, name = m.groups()
                if name:
                    names[ident] = re.sub(r"'\d+$", "", name)  # merge recursion levels
                if kind == "fn":
                    fn = names.get(ident, ident)
                continue
            if line.startswith("calls="):
                skip_next = True  # the next line is the call's inclusive cost
                continue
            if fn and line[:1] in "0123456789+-*":
                parts = line.split()
                if len(parts) >= 2:
                    cost[fn] += int(parts[1])
    return cost


def callgrind(configs: list[str], calls: int, valgrind: str, top: int) -> None:
    tmp = tempfile.mkdtemp(prefix="ember-hookcost-")
    per_call: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = {}
    for c in configs:
        outs = []
        for n in (calls, 2 * calls):
            out = os.path.join(tmp, f"{c}.{n}.callgrind")
            run_loop(c, [str(n), "plain"], [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}"])
            outs.append(self_costs(out))
        diff = {fn: (outs[1].get(fn, 0) - outs[0].get(fn, 0)) / calls for fn in set(outs[0]) | set(outs[1])}
        per_call[c] = diff
        totals[c] = sum(diff.values())
        print(f"  {c:12} {totals[c]:8.1f} instructions per iteration", flush=True)
    print()
    for a, b in zip(configs, configs[1:]):
        print(f"{b} - {a}: {totals[b] - totals[a]:+.1f} instructions per iteration; by function (self cost):")
        delta = {fn: per_call[b].get(fn, 0) - per_call[a].get(fn, 0) for fn in set(per_call[a]) | set(per_call[b])}
        for fn, d in sorted(delta.items(), key=lambda kv: -abs(kv[1]))[:top]:
            if abs(d) < 0.05:
                break
            print(f"  {d:+8.2f}  {fn}  ({per_call[a].get(fn, 0):.2f} -> {per_call[b].get(fn, 0):.2f})")
        print()
    print(f"callgrind files in {tmp}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="interp,passthrough,ember")
    p.add_argument("--calls", type=int, default=None, help="calls per process (timing 5,000,000; callgrind 200,000)")
    p.add_argument("--runs", type=int, default=7, help="processes per configuration for timing (7)")
    p.add_argument("--callgrind", metavar="VALGRIND", help="count instructions with this valgrind program")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--workload", choices=sorted(LOOPS), default="call",
                   help="call: a Python call per iteration; gen: a generator resumption per iteration")
    args = p.parse_args()
    global LOOP
    LOOP = LOOPS[args.workload] + DRIVER
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        ebench.config(c)
    build = run.snapshot_ember()  # the same Ember for every process, whatever happens to build/
    print(f"ember: {run.fmt_build(build)}; workload: {args.workload}", flush=True)
    try:
        if args.callgrind:
            callgrind(configs, args.calls or 200_000, args.callgrind, args.top)
        else:
            timing(configs, args.calls or 5_000_000, args.runs)
    finally:
        if run.EMBER_SNAPSHOT:
            import shutil
            shutil.rmtree(run.EMBER_SNAPSHOT, ignore_errors=True)


if __name__ == "__main__":
    main()
