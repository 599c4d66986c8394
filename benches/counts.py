"""Instructions per benchmark iteration, counted by cachegrind: what each
configuration executes, which load on the machine does not change (timings
on a shared VM spread by tens of percent; see README.md).

    dev/env python benches/counts.py [--benchmarks richards,nbody,...] [--configs interp,ember-t1]
        [--window A:B] [--whole] [--out DIR]

Per benchmark and configuration, cachegrind (`valgrind --tool=cachegrind
--cache-sim=yes`, PYTHONHASHSEED=0) counts the whole process running
`benches/iterate.py BENCH A`, then `... BENCH B`; per iteration is (count at
B - count at A) / (B - A), so start-up, imports and the first iterations
(warm-up, compilation) cancel out. The window is 1:3, except 4:6 for nbody
and float (an iteration calls their loop function once, and tier 1 compiles
it at its third call). With --whole, the count of a process running one
iteration, all included: a cold-run measure.

Reported: instructions (cachegrind's I refs) and level-1 instruction-cache
misses (I1 misses, cachegrind's model of this machine's cache) per
iteration, and each configuration's ratio to the first one. Configurations:

    interp    python3.14
    ember-t1  python -m ember, EMBER_MAX_TIER=1 EMBER_TIER1_THRESHOLD=2
    ember     python -m ember, EMBER_MAX_TIER=1 (the default thresholds)

For an Ember configuration the functions compiled at tier 1 are reported
(EMBER_STATS of the process at B), and a run that compiled none fails.
Writes results.json and table.md to benches/results/counts-<time>/ (or --out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ITERATE = os.path.join(HERE, "iterate.py")
DEV_SET = ["richards", "nbody", "float", "chaos", "spectral_norm", "nqueens", "fannkuch", "generators",
           "coroutines", "unpack_sequence"]
CONFIGS = {
    "interp": ([], {}),
    "ember-t1": (["-m", "ember"], {"EMBER_MAX_TIER": "1", "EMBER_TIER1_THRESHOLD": "2"}),
    "ember": (["-m", "ember"], {"EMBER_MAX_TIER": "1"}),
}
# Benchmarks whose iteration is one call of their loop function.
LATE_WINDOW = {"nbody": (4, 6), "float": (4, 6)}


def count(valgrind: str, bench: str, config: str, n: int) -> dict:
    """Cachegrind's totals for one process running `n` iterations."""
    args, extra = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    env.update(extra, PYTHONHASHSEED="0")
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        if args:
            env["EMBER_STATS"] = stats
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=/dev/null",
               sys.executable, *args, ITERATE, bench, str(n)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"counts.py: {bench} under {config} failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
        out = {}
        for key, pattern in (("instructions", r"I\s+refs:\s+([\d,]+)"), ("i1_misses", r"I1\s+misses:\s+([\d,]+)")):
            m = re.search(pattern, p.stderr)
            if not m:
                sys.exit(f"counts.py: no {key} in cachegrind's output for {bench} under {config}:\n{p.stderr[-2000:]}")
            out[key] = int(m.group(1).replace(",", ""))
        if args:
            with open(stats, encoding="utf-8") as f:
                out["tier1_compiled"] = json.load(f)["global"]["tier1"]["compiled"]
    return out


def measure(valgrind: str, bench: str, config: str, window: tuple[int, int] | None) -> dict:
    if window is None:
        whole = count(valgrind, bench, config, 1)
        return {"window": None, **whole}
    a, b = window
    ca, cb = count(valgrind, bench, config, a), count(valgrind, bench, config, b)
    r = {"window": [a, b], "instructions": (cb["instructions"] - ca["instructions"]) / (b - a),
         "i1_misses": (cb["i1_misses"] - ca["i1_misses"]) / (b - a)}
    if "tier1_compiled" in cb:
        r["tier1_compiled"] = cb["tier1_compiled"]
    return r


def table(results: dict, benches: list[str], configs: list[str], whole: bool) -> str:
    what = "per process (one iteration, start-up included)" if whole else "per iteration"
    head = ["benchmark"] + [f"{c} instructions" for c in configs] + [f"{c} / {configs[0]}" for c in configs[1:]]
    head += [f"{c} I1 misses" for c in configs]
    lines = [f"Counted by cachegrind, {what}.", "", "| " + " | ".join(head) + " |",
             "|---|" + "---:|" * (len(head) - 1)]
    for b in benches:
        r = results[b]
        row = [b] + [f"{r[c]['instructions'] / 1e6:,.2f}M" for c in configs]
        row += [f"{r[c]['instructions'] / r[configs[0]]['instructions']:.3f}" for c in configs[1:]]
        row += [f"{r[c]['i1_misses']:,.0f}" for c in configs]
        lines.append("| " + " | ".join(row) + " |")
    compiled = [f"{b} {c}: {results[b][c]['tier1_compiled']}" for b in benches for c in configs
                if "tier1_compiled" in results[b][c]]
    if compiled:
        lines += ["", "Functions compiled at tier 1 (the process at the window's end): " + ", ".join(compiled) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--benchmarks", "-b", default=",".join(DEV_SET))
    p.add_argument("--configs", default="interp,ember-t1")
    p.add_argument("--window", help="A:B, the iteration counts compared (default 1:3; nbody, float 4:6)")
    p.add_argument("--whole", action="store_true", help="count whole one-iteration processes instead")
    p.add_argument("--out")
    args = p.parse_args()
    benches = [b for b in args.benchmarks.split(",") if b]
    configs = [c for c in args.configs.split(",") if c]
    from iterate import ITERATION

    for b in benches:
        if b not in ITERATION:
            sys.exit(f"counts.py: no iteration defined for {b!r} in iterate.py (known: {', '.join(ITERATION)})")
    for c in configs:
        if c not in CONFIGS:
            sys.exit(f"counts.py: unknown configuration {c!r} (known: {', '.join(CONFIGS)})")
    window = None
    if args.window:
        a, _, b = args.window.partition(":")
        if not (a.isdigit() and b.isdigit() and 0 <= int(a) < int(b)):
            sys.exit(f"counts.py: --window wants A:B with 0 <= A < B, not {args.window!r}")
        window = (int(a), int(b))
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("counts.py: valgrind is not installed here")
    results = {}
    for bench in benches:
        results[bench] = {}
        for config in configs:
            w = None if args.whole else window or LATE_WINDOW.get(bench, (1, 3))
            t0 = time.monotonic()
            r = measure(valgrind, bench, config, w)
            if "tier1_compiled" in r and r["tier1_compiled"] == 0:
                sys.exit(f"counts.py: {bench} under {config} compiled nothing at tier 1: it measured nothing of Ember")
            results[bench][config] = r
            print(f"{bench} {config}: {r['instructions'] / 1e6:,.2f}M instructions, {r['i1_misses']:,.0f} I1 misses"
                  + (f", {r['tier1_compiled']} compiled at tier 1" if "tier1_compiled" in r else "")
                  + f" ({time.monotonic() - t0:.0f} s)", flush=True)
    md = table(results, benches, configs, args.whole)
    out = args.out or os.path.join(HERE, "results", time.strftime("counts-%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"whole": args.whole, "configs": configs, "results": results}, f, indent=1)
    with open(os.path.join(out, "table.md"), "w", encoding="utf-8") as f:
        f.write(md)
    print()
    print(md)
    print(f"results in {out}")


if __name__ == "__main__":
    main()
