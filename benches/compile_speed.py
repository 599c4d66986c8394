"""Compile speed and code size: tier 1 over every function of the stdlib,
and CinderX's figures for the same functions.

    dev/env python benches/compile_speed.py [--modules all|NAME,...] [--no-cinderx] [--out DIR]

Imports every importable stdlib module (`sys.stdlib_module_names`, minus
test packages and modules with side effects at import; those that fail to
import are counted), collects the Python functions defined there (module
functions and the methods of module classes, nested classes included), and
in a fresh process per compiler compiles each function once:

* Ember tier 1: `ember._ember._compile(code)`; Ember's own compile time
  (`compile_ns`, the compiler proper plus gathering the code object's data)
  and the wall time of the call; bytecode instructions and machine-code
  bytes as tier 1 counts them;
* CinderX: `cinderx.jit.force_compile(func)`; the wall time of the call and
  `get_function_compilation_time` (whole milliseconds: too coarse per
  function, reported as a total), `get_compiled_size`.

Per function the time per bytecode instruction (instructions counted the
same way for both: `dis.get_instructions`, caches excluded) and the median,
p90 and total are reported. Writes results.json and table.md to
benches/results/compile-<timestamp>/ (or --out).
"""

from __future__ import annotations

import argparse
import dis
import importlib
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
# Packages of tests and modules that act when imported (open windows, print,
# start a browser) or that cannot be imported twice in one process.
EXCLUDE_PREFIXES = ("test", "idlelib", "tkinter", "turtle", "turtledemo", "antigravity", "this",
                    "__hello__", "__phello__", "_pyrepl", "lib2to3", "ensurepip", "venv", "pydoc_data",
                    "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
                    "_testsinglephase", "_testimportmultiple", "_testlimitedcapi", "_testclinic",
                    "_testexternalinspection", "xxlimited", "xxsubtype", "xxtestfuzz")


def stdlib_modules(spec: str) -> list[str]:
    if spec != "all":
        return spec.split(",")
    names = sorted(n for n in sys.stdlib_module_names if not n.startswith(EXCLUDE_PREFIXES))
    return names


def collect(modules: list[str]) -> tuple[list[tuple[str, types.FunctionType]], list[str]]:
    """(module:qualname, function) for every Python function defined in the
    modules, and the modules that failed to import."""
    funcs, failed, seen = [], [], set()
    for name in modules:
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - any import failure is counted, not fatal
            failed.append(name)
            continue
        stack = [v for v in vars(mod).values()]
        while stack:
            v = stack.pop()
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            if isinstance(v, types.FunctionType):
                if v.__module__ == name and id(v.__code__) not in seen:
                    seen.add(id(v.__code__))
                    funcs.append((f"{name}:{v.__qualname__}", v))
            elif isinstance(v, type) and v.__module__ == name and id(v) not in seen:
                seen.add(id(v))
                stack.extend(vars(v).values())
    return funcs, failed


def n_instructions(func) -> int:
    return sum(1 for _ in dis.get_instructions(func))


def run_ember(funcs) -> dict:
    import ember._ember as E

    rows, refused = [], {}
    for key, f in funcs:
        t0 = time.perf_counter_ns()
        why = E._compile(f.__code__)
        wall = time.perf_counter_ns() - t0
        info = E._tier1_info(f.__code__)
        if info is None:
            refused[why or "not compiled"] = refused.get(why or "not compiled", 0) + 1
            continue
        instrs, code_bytes, compile_ns = info
        rows.append({"function": key, "instructions": n_instructions(f), "tier1_instructions": instrs,
                     "code_bytes": code_bytes, "compile_ns": compile_ns, "wall_ns": wall})
    return {"rows": rows, "refused": refused}


def run_cinderx(funcs) -> dict:
    import cinderx.jit as jit

    rows, refused = [], 0
    for key, f in funcs:
        t0 = time.perf_counter_ns()
        try:
            ok = jit.force_compile(f)
        except Exception:  # noqa: BLE001 - a refusal, counted
            ok = False
        wall = time.perf_counter_ns() - t0
        if not ok or not jit.is_jit_compiled(f):
            refused += 1
            continue
        rows.append({"function": key, "instructions": n_instructions(f), "code_bytes": jit.get_compiled_size(f),
                     "compile_ms": jit.get_function_compilation_time(f), "wall_ns": wall})
    return {"rows": rows, "refused": {"not compiled": refused} if refused else {}}


def summarise(rows, time_key) -> dict:
    per = sorted(r[time_key] / r["instructions"] for r in rows if r["instructions"])
    if not per:
        return {}
    instrs = sum(r["instructions"] for r in rows)
    return {
        "functions": len(rows),
        "instructions": instrs,
        "median_ns_per_instruction": statistics.median(per),
        "p90_ns_per_instruction": per[int(0.9 * (len(per) - 1))],
        "total_ms": sum(r[time_key] for r in rows) / 1e6,
        "bytes_per_instruction": sum(r["code_bytes"] for r in rows) / instrs,
    }


def child(which: str, modules: str) -> None:
    funcs, failed = collect(stdlib_modules(modules))
    result = run_ember(funcs) if which == "ember" else run_cinderx(funcs)
    result.update({"functions_found": len(funcs), "modules_failed": failed})
    json.dump(result, sys.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default="all", help="'all' (default) or comma-separated module names")
    parser.add_argument("--no-cinderx", action="store_true", help="measure Ember only")
    parser.add_argument("--out", help="output directory (default benches/results/compile-<timestamp>)")
    parser.add_argument("--child", choices=["ember", "cinderx"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.modules)
        return 0
    out = args.out or os.path.join(HERE, "results", time.strftime("compile-%Y%m%d-%H%M"))
    os.makedirs(out, exist_ok=True)
    results = {}
    for which in ["ember"] + ([] if args.no_cinderx else ["cinderx"]):
        print(f"compiling with {which} ...", flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
        p = subprocess.run([sys.executable, __file__, "--child", which, "--modules", args.modules],
                           env=env, capture_output=True, text=True, timeout=3600)
        if p.returncode != 0:
            print(p.stderr, file=sys.stderr)
            print(f"compile_speed: the {which} run failed (exit {p.returncode})", file=sys.stderr)
            return 1
        # Modules may print at import; the JSON is the last line.
        results[which] = json.loads(p.stdout.strip().splitlines()[-1])
    ember = results["ember"]
    table = ["| compiler | functions compiled (found) | bytecode instructions | median ns / instruction "
             "| p90 ns / instruction | total | bytes / instruction | refused |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]

    def row(name, res, key):
        s = summarise(res["rows"], key)
        refused = ", ".join(f"{k}: {v}" for k, v in sorted(res["refused"].items(), key=lambda kv: -kv[1])[:4])
        table.append(f"| {name} | {s['functions']} ({res['functions_found']}) | {s['instructions']} | "
                     f"{s['median_ns_per_instruction']:.0f} | {s['p90_ns_per_instruction']:.0f} | "
                     f"{s['total_ms']:.0f} ms | {s['bytes_per_instruction']:.1f} | {refused or '-'} |")
        return s

    summary = {"ember_compile_ns": row("Ember tier 1 (compile_ns)", ember, "compile_ns"),
               "ember_wall": row("Ember tier 1 (wall, `_compile` call)", ember, "wall_ns")}
    if "cinderx" in results:
        summary["cinderx_wall"] = row("CinderX (wall, `force_compile` call)", results["cinderx"], "wall_ns")
        cx_total = sum(r["compile_ms"] for r in results["cinderx"]["rows"])
        table.append(f"\nCinderX's own `get_function_compilation_time`, summed: {cx_total} ms "
                     "(whole milliseconds per function).")
    table.append(f"\nModules that failed to import: {len(ember['modules_failed'])} "
                 f"({', '.join(ember['modules_failed'][:12])}{', ...' if len(ember['modules_failed']) > 12 else ''}).")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"summary": summary, "raw": results}, f, indent=1)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(table) + "\n")
    print("\n".join(table))
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
