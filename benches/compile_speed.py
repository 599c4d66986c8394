"""Compile speed and code size: tier 1 over every function of the stdlib,
and CinderX's figures for the same functions.

    dev/env python benches/compile_speed.py [--modules all|NAME,...] [--no-cinderx] [--out DIR]

Imports every importable stdlib module (`sys.stdlib_module_names` and the
submodules of those that are packages, minus test packages, `__main__`
modules and modules with side effects at import; those that fail to import
are counted), collects every function defined there (module functions,
methods of the modules' classes and nested classes, static and class
methods, properties' accessors, and the nested code objects in their
`co_consts`: inner functions, lambdas, generator expressions), and in a
fresh process per compiler compiles each function once:

* Ember tier 1: `ember._ember._compile(code)`; Ember's own compile time
  (`compile_ns`, the compiler proper plus gathering the code object's data
  and publishing the code), the part of it spent publishing (`publish_ns`:
  making the code executable without ever mapping it writable, a `pwrite`
  into the arena's file), the rest (the compiler proper), and the wall time
  of the call; `compile_ns` again for copies of the functions compiled
  into memory that other copies' code occupied and freed; bytecode instructions and machine-code bytes as tier 1
  counts them, and the part of those bytes on the instructions' common
  paths (`hot_bytes`: what a loop runs through; the rare paths follow);
  refusals by reason;
* CinderX: `cinderx.jit.force_compile(func)` (a nested code object gets a
  function made for it, with empty closure cells); the wall time of the
  call and `get_function_compilation_time` (whole milliseconds: too coarse
  per function, reported as a total), `get_compiled_size`; refusals (a
  False result or an exception) by reason.

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
import pkgutil
import statistics
import subprocess
import sys
import time
import types
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
# Packages of tests and modules that act when imported (open windows, print,
# start a browser) or that cannot be imported twice in one process.
EXCLUDE_PREFIXES = ("test", "idlelib", "tkinter", "turtle", "turtledemo", "antigravity", "this",
                    "__hello__", "__phello__", "_pyrepl", "lib2to3", "ensurepip", "venv", "pydoc_data",
                    "_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase",
                    "_testsinglephase", "_testimportmultiple", "_testlimitedcapi", "_testclinic",
                    "_testexternalinspection", "xxlimited", "xxsubtype", "xxtestfuzz")
# Submodules left out wherever they are: tests, and `python -m` entry points
# (they run when imported).
EXCLUDE_PARTS = {"test", "tests", "__main__", "idle_test"}


def excluded(name: str) -> bool:
    return name.startswith(EXCLUDE_PREFIXES) or bool(EXCLUDE_PARTS & set(name.split(".")))


def stdlib_modules(spec: str) -> list[str]:
    if spec != "all":
        return spec.split(",")
    return sorted(n for n in sys.stdlib_module_names if not excluded(n))


def import_all(modules: list[str]) -> tuple[list[types.ModuleType], list[str]]:
    """The modules and, for packages, their submodules, imported; and the
    names that failed to import."""
    mods, failed, done = [], [], set()

    def one(name):
        if name in done or excluded(name):
            return None
        done.add(name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - any import failure is counted, not fatal
            failed.append(name)
            return None
        mods.append(mod)
        return mod

    for name in modules:
        mod = one(name)
        path = getattr(mod, "__path__", None)
        if mod is None or path is None:
            continue
        for info in pkgutil.walk_packages(path, name + ".", onerror=lambda n: None):
            one(info.name)
    return mods, failed


def collect(modules: list[str]):
    """(module:qualname, code object, function or None, globals) for every
    function defined in the modules, nested code included; the modules that
    failed to import; and how many functions were found where."""
    mods, failed = import_all(modules)
    funcs, seen = [], set()
    found = {"functions": 0, "nested": 0}

    def add_code(modname, code, func, globs, how):
        if id(code) in seen or not code.co_flags & inspect.CO_OPTIMIZED:
            return
        seen.add(id(code))
        funcs.append((f"{modname}:{code.co_qualname}", code, func, globs))
        found[how] += 1
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                add_code(modname, c, None, globs, "nested")

    for mod in mods:
        name = mod.__name__
        stack = list(vars(mod).values())
        visited = set()
        while stack:
            v = stack.pop()
            if isinstance(v, (staticmethod, classmethod)):
                v = v.__func__
            if isinstance(v, property):
                stack.extend(f for f in (v.fget, v.fset, v.fdel) if f is not None)
            elif isinstance(v, types.FunctionType):
                if v.__module__ == name:
                    add_code(name, v.__code__, v, v.__globals__, "functions")
            elif isinstance(v, type) and v.__module__ == name and id(v) not in visited:
                visited.add(id(v))
                stack.extend(vars(v).values())
    return funcs, failed, found


def n_instructions(code) -> int:
    return sum(1 for _ in dis.get_instructions(code))


def run_ember(funcs) -> dict:
    import ember._ember as E

    rows, refused, compiled = [], {}, []
    for key, code, _func, _globs in funcs:
        t0 = time.perf_counter_ns()
        why = E._compile(code)
        wall = time.perf_counter_ns() - t0
        info = E._tier1_info(code)
        if info is None:
            reason = why or "not compiled"
            refused[reason] = refused.get(reason, 0) + 1
            continue
        instrs, code_bytes, compile_ns, publish_ns, hot_bytes = info
        rows.append({"function": key, "instructions": n_instructions(code), "tier1_instructions": instrs,
                     "code_bytes": code_bytes, "hot_bytes": hot_bytes, "compile_ns": compile_ns,
                     "publish_ns": publish_ns,
                     "unpublished_ns": compile_ns - publish_ns, "wall_ns": wall})
        compiled.append((key, code, rows[-1]["instructions"]))
    # Into freed memory: copies of the code objects compiled and dropped
    # (their code freed), then other copies compiled into what they left,
    # as when a program's code objects die and new ones are compiled.
    copies = [code.replace() for _, code, _ in compiled]
    for c in copies:
        E._compile(c)
    del copies
    reuse_rows = []
    for key, code, n in compiled:
        c = code.replace()
        E._compile(c)
        info = E._tier1_info(c)
        if info is not None:
            reuse_rows.append({"function": key, "instructions": n, "code_bytes": info[1],
                               "compile_ns": info[2], "publish_ns": info[3]})
    return {"rows": rows, "refused": refused, "reuse_rows": reuse_rows}


def as_function(code, func, globs):
    if func is not None:
        return func
    cells = tuple(types.CellType() for _ in code.co_freevars)
    return types.FunctionType(code, globs, code.co_name, None, cells)


def run_cinderx(funcs) -> dict:
    import cinderx.jit as jit

    rows, refused = [], {}
    for key, code, func, globs in funcs:
        f = as_function(code, func, globs)
        t0 = time.perf_counter_ns()
        try:
            ok = jit.force_compile(f)
            reason = "force_compile returned False"
        except Exception as e:  # noqa: BLE001 - a refusal, counted by reason
            ok, reason = False, f"{type(e).__name__}: {e}"[:120]
        wall = time.perf_counter_ns() - t0
        if not ok or not jit.is_jit_compiled(f):
            refused[reason] = refused.get(reason, 0) + 1
            continue
        rows.append({"function": key, "instructions": n_instructions(code), "code_bytes": jit.get_compiled_size(f),
                     "compile_ms": jit.get_function_compilation_time(f), "wall_ns": wall})
    return {"rows": rows, "refused": refused}


def percentile(sorted_values, q):
    return sorted_values[int(q * (len(sorted_values) - 1))]


def summarise(rows, time_key) -> dict:
    per = sorted(r[time_key] / r["instructions"] for r in rows if r["instructions"])
    if not per:
        return {}
    instrs = sum(r["instructions"] for r in rows)
    size = sorted(r["code_bytes"] / r["instructions"] for r in rows if r["instructions"])
    return {
        "functions": len(rows),
        "instructions": instrs,
        "median_ns_per_instruction": statistics.median(per),
        "p90_ns_per_instruction": percentile(per, 0.9),
        "total_ms": sum(r[time_key] for r in rows) / 1e6,
        "bytes_per_instruction": sum(r["code_bytes"] for r in rows) / instrs,
        "median_bytes_per_instruction": statistics.median(size),
        **({"hot_bytes_per_instruction": sum(r["hot_bytes"] for r in rows) / instrs,
            "median_hot_bytes_per_instruction": statistics.median(
                sorted(r["hot_bytes"] / r["instructions"] for r in rows if r["instructions"]))}
           if all("hot_bytes" in r for r in rows) else {}),
    }


def child(which: str, modules: str, out: str) -> None:
    funcs, failed, found = collect(stdlib_modules(modules))
    result = run_ember(funcs) if which == "ember" else run_cinderx(funcs)
    result.update({"functions_found": len(funcs), "found_as": found, "modules_failed": failed})
    # A file, not stdout: modules may print when imported.
    with open(out, "w") as f:
        json.dump(result, f)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default="all", help="'all' (default) or comma-separated module names")
    parser.add_argument("--no-cinderx", action="store_true", help="measure Ember only")
    parser.add_argument("--out", help="output directory (default benches/results/compile-<timestamp>)")
    parser.add_argument("--child", choices=["ember", "cinderx"], help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.modules, args.child_out)
        return 0
    # Absolute: the children run in it.
    out = os.path.abspath(args.out or os.path.join(HERE, "results", time.strftime("compile-%Y%m%d-%H%M")))
    os.makedirs(out, exist_ok=True)
    results = {}
    for which in ["ember"] + ([] if args.no_cinderx else ["cinderx"]):
        print(f"compiling with {which} ...", flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
        raw = os.path.join(out, f"raw-{which}.json")
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, __file__, "--child", which, "--modules", args.modules,
                            "--child-out", raw], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=3600, cwd=out)
        if p.returncode != 0:
            print(p.stderr[-5000:], file=sys.stderr)
            print(f"compile_speed: the {which} run failed (exit {p.returncode})", file=sys.stderr)
            return 1
        with open(raw) as f:
            results[which] = json.load(f)
        os.unlink(raw)
        print(f"  {which}: {time.monotonic() - t0:.0f} s", flush=True)
    ember = results["ember"]
    found = ember["found_as"]
    table = [f"Functions found: {ember['functions_found']} ({found['functions']} module functions and "
             f"methods, {found['nested']} nested code objects); modules that failed to import: "
             f"{len(ember['modules_failed'])}.", "",
             "| compiler | functions compiled (found) | bytecode instructions | median ns / instruction "
             "| p90 ns / instruction | total | bytes / instruction (all) | median bytes / instruction |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def row(name, res, key, rows=None):
        s = summarise(res["rows"] if rows is None else rows, key)
        table.append(f"| {name} | {s['functions']} ({res['functions_found']}) | {s['instructions']} | "
                     f"{s['median_ns_per_instruction']:.0f} | {s['p90_ns_per_instruction']:.0f} | "
                     f"{s['total_ms']:.0f} ms | {s['bytes_per_instruction']:.1f} | "
                     f"{s['median_bytes_per_instruction']:.1f} |")
        return s

    summary = {"ember_compile_ns": row("Ember tier 1 (compile_ns)", ember, "compile_ns"),
               "ember_publish_ns": row("Ember tier 1: of which publishing (publish_ns)", ember, "publish_ns"),
               "ember_unpublished_ns": row("Ember tier 1: the rest (compile_ns - publish_ns)", ember,
                                           "unpublished_ns"),
               "ember_wall": row("Ember tier 1 (wall, `_compile` call)", ember, "wall_ns"),
               "ember_reuse_compile_ns": row("Ember tier 1 into freed memory (compile_ns)", ember, "compile_ns",
                                             ember["reuse_rows"])}
    # CinderX in the same table, before the notes and the table by size.
    if "cinderx" in results:
        cx = results["cinderx"]
        summary["cinderx_wall"] = row("CinderX (wall, `force_compile` call)", cx, "wall_ns")
        both = {r["function"] for r in ember["rows"]} & {r["function"] for r in cx["rows"]}
        table.append("| *functions both compiled:* | | | | | | | |")
        summary["both_ember_compile_ns"] = row(
            "Ember tier 1 (compile_ns)", ember, "compile_ns", [r for r in ember["rows"] if r["function"] in both])
        summary["both_cinderx_wall"] = row(
            "CinderX (wall)", cx, "wall_ns", [r for r in cx["rows"] if r["function"] in both])
    s = summary["ember_compile_ns"]
    table.append(f"\nEmber tier 1's common paths (hot_bytes: the code before the instructions' rare paths, "
                 f"which follow it): {s['hot_bytes_per_instruction']:.1f} bytes / instruction (all), "
                 f"median {s['median_hot_bytes_per_instruction']:.1f}.")
    if "cinderx" in results:
        cx_total = sum(r["compile_ms"] for r in results["cinderx"]["rows"])
        table.append(f"\nCinderX's own `get_function_compilation_time`, summed: {cx_total} ms "
                     "(whole milliseconds per function).")
    table.extend(["", "Ember tier 1 by function size (medians per function, in ns; the median function has "
                  f"{statistics.median(r['instructions'] for r in ember['rows']):.0f} instructions): what a "
                  "function costs whatever its length, and what each instruction adds.", "",
                  "| instructions | functions | median instructions | compile_ns | publish_ns | the rest |",
                  "|---|---:|---:|---:|---:|---:|"])
    summary["ember_by_size"] = []
    for lo, hi in [(1, 5), (5, 10), (10, 20), (20, 40), (40, 80), (80, 160), (160, 320), (320, None)]:
        b = [r for r in ember["rows"] if lo <= r["instructions"] and (hi is None or r["instructions"] < hi)]
        if not b:
            continue
        line = {"from": lo, "below": hi, "functions": len(b),
                **{k: statistics.median(r[k] for r in b)
                   for k in ("instructions", "compile_ns", "publish_ns", "unpublished_ns")}}
        summary["ember_by_size"].append(line)
        table.append(f"| {lo} to {hi - 1 if hi else 'more'} | {len(b)} | {line['instructions']:.0f} | "
                     f"{line['compile_ns']:.0f} | {line['publish_ns']:.0f} | {line['unpublished_ns']:.0f} |")
    for name, res in results.items():
        refused = sorted(res["refused"].items(), key=lambda kv: -kv[1])
        total = sum(n for _, n in refused)
        table.append(f"\nRefused by {name}: {total}" + ("." if not refused else ":"))
        table.extend(f"- {reason}: {n}" for reason, n in refused[:15])
        if len(refused) > 15:
            table.append(f"- ... {len(refused) - 15} more reasons (results.json)")
    failed = ember["modules_failed"]
    table.append(f"\nModules that failed to import: {len(failed)} "
                 f"({', '.join(failed[:20])}{', ...' if len(failed) > 20 else ''}).")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"summary": summary, "raw": results}, f, indent=1)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("\n".join(table) + "\n")
    print("\n".join(table))
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
