"""Generated-program differential fuzzing: the interpreter against tier 1.

    dev/env python tests/fuzz/run.py --seeds 0:10000 [--jobs 1] [--batch 100]

For each seed, gen.generate(seed) makes a program (tests/fuzz/gen.py). The
programs of a batch (default 100 seeds) are written to one JSON file, and
two child processes run all of them, one after the other, each with
exec(compile(src, "<fuzz SEED>", "exec"), fresh_namespace), standard output
and standard error captured:

* ``plain``: stock CPython, no EMBER* variable in the environment;
* ``tier1``: ``EMBER=1 EMBER_MAX_TIER=1 EMBER_TIER1_THRESHOLD=0``: Ember on,
  every code object compiled at tier 1 at its first call.

Both have PYTHONHASHSEED=0 and the cyclic GC off while a program runs
(collected between programs), so that nothing but the tier differs, and the
same memory cap (``MEMORY_CAP``: a program asking for more gets a
MemoryError). Each child writes one JSON line per program (its stdout, its
stderr, and the exception that escaped the module, if any); the ``tier1``
child also reports, from ember.stats() taken while every program's code
objects are still alive, how many code objects of each program ran and how
many were compiled at tier 1.

A seed diverges when the two records differ in anything (stdout, stderr,
escaping exception), or when one child crashed or hung on it. Each
divergence is written to DIVERGENCE_DIR/SEED.py (the program) and SEED.txt
(what differed, both outputs). The run fails (exit status 1) on any
divergence, and also when no code object of the programs was compiled at
tier 1 (a run that compiled nothing tested nothing).
"""

from __future__ import annotations

import argparse
import builtins
import collections
import concurrent.futures
import contextlib
import difflib
import gc
import hashlib
import io
import json
import linecache
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
DEFAULT_DIVERGENCE_DIR = os.path.join(HERE, "divergences")

MODES = {
    "plain": {},
    "tier1": {"EMBER": "1", "EMBER_MAX_TIER": "1", "EMBER_TIER1_THRESHOLD": "0"},
}
HASH_SEED = "0"
#: Self-test hook: the tier1 child appends a line to this seed's stdout, so
#: that the whole pipeline can be shown to catch a divergence. (Not EMBER_*:
#: Ember refuses variables it does not know.)
INJECT_VAR = "FUZZ_INJECT_DIVERGENCE"
#: Self-test hook: the tier1 child aborts (as a crash would) on this seed.
INJECT_CRASH_VAR = "FUZZ_INJECT_CRASH"
#: Each child's data segment (RLIMIT_DATA: heap and private writable
#: mappings; tier 1's code is a shared mapping, not counted). A program
#: asking for more gets a MemoryError, the same in both children, where
#: without a cap the kernel killed whichever child it chose when two big
#: programs ran at once (a generated function written for ints, called
#: with a tuple, multiplied it by 1_000_000_007). The programs need tens of MB.
MEMORY_CAP = 4 << 30


# ----------------------------------------------------------------- children

def _exc_summary(e: BaseException) -> list:
    import traceback
    frames = [f"{f.name}:{f.lineno}" for f in traceback.extract_tb(e.__traceback__)]
    return [type(e).__name__, str(e)[:500], frames]


def run_program(seed: int, src: str, keep: list) -> dict:
    """Run one program in a fresh namespace; its output and escaping exception."""
    filename = f"<fuzz {seed}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"__name__": "__fuzz__", "__builtins__": builtins}
    out, err = io.StringIO(), io.StringIO()
    exc = None
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                code = compile(src, filename, "exec")
            keep.append(code)
            exec(code, ns)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 -- compared, not judged
            exc = _exc_summary(e)
            del e
        finally:
            if sys.gettrace() is not None:
                sys.settrace(None)
            ns.clear()
            gc.collect()
    ms = (time.perf_counter() - t0) * 1000
    linecache.cache.pop(filename, None)
    return {"seed": seed, "sha": hashlib.sha1(src.encode()).hexdigest()[:16],
            "out": out.getvalue(), "err": err.getvalue(), "exc": exc, "ms": round(ms, 2)}


def _fuzz_seed(filename: str):
    m = re.fullmatch(r"<fuzz (\d+)>", filename)
    return int(m.group(1)) if m else None


def child_main(batch_path: str, out_path: str) -> int:
    import resource
    resource.setrlimit(resource.RLIMIT_DATA, (MEMORY_CAP, MEMORY_CAP))
    ember = None
    if os.environ.get("EMBER") == "1":
        import ember  # noqa: F401 -- turned on by the EMBER=1 autoload
    with open(batch_path, encoding="utf-8") as f:
        batch = json.load(f)
    inject = os.environ.get(INJECT_VAR) if ember is not None else None
    crash_at = os.environ.get(INJECT_CRASH_VAR) if ember is not None else None
    keep = []  # every program's code object: their records stay alive for the stats
    gc.disable()
    with open(out_path, "w", encoding="utf-8") as out:
        def emit(obj):
            out.write(json.dumps(obj) + "\n")
            out.flush()
        emit({"child": os.getpid(), "ember": ember is not None,
              "enabled": bool(ember and ember.is_enabled())})
        for item in batch:
            emit({"start": item["seed"]})
            if crash_at is not None and int(crash_at) == item["seed"]:
                os.abort()
            rec = run_program(item["seed"], item["src"], keep)
            if inject is not None and int(inject) == item["seed"]:
                rec["out"] += "injected divergence\n"
            emit(rec)
        if ember is not None:
            st = ember.stats()
            per_seed = {}
            for fn in st["functions"]:
                seed = _fuzz_seed(fn["filename"])
                if seed is None:
                    continue
                p = per_seed.setdefault(seed, {"ran": 0, "compiled": 0, "tier1_now": 0,
                                               "handoffs": 0, "reasons": {}})
                if fn["calls"] + fn["resumes"] > 0:
                    p["ran"] += 1
                if fn["compiles"].get("1", 0) > 0:
                    p["compiled"] += 1
                if fn["tier"] == 1:
                    p["tier1_now"] += 1
                p["handoffs"] += fn["handoffs"]
                reason = fn.get("interpreter_reason")
                if reason and fn["calls"] + fn["resumes"] > 0:
                    p["reasons"][reason] = p["reasons"].get(reason, 0) + 1
            g = st["global"]
            emit({"stats": {
                "enabled": st["enabled"],
                "per_seed": {str(k): v for k, v in per_seed.items()},
                "tier1_compiled_total": g["tier1"]["compiled"],
                "ever_compiled": g["code_objects_ever_compiled"].get("1", 0),
                "handoffs": g["tier1"]["handoffs"],
                "refused": g["tier1"]["refused"],
            }})
        else:
            emit({"stats": None})
        emit({"done": True})
    return 0


# ------------------------------------------------------------------- parent

def child_env(mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    env.pop(INJECT_VAR, None)
    env.pop(INJECT_CRASH_VAR, None)
    env["PYTHONHASHSEED"] = HASH_SEED
    env.update(MODES[mode])
    return env


def run_child(mode: str, items: list, workdir: str, *, timeout: float, extra_env=None) -> dict:
    """Run `items` ([{seed, src}]) in one child; parse what it wrote."""
    tag = f"{mode}-{items[0]['seed']}-{threading.get_ident()}-{time.monotonic_ns()}"
    batch_path = os.path.join(workdir, tag + ".json")
    out_path = os.path.join(workdir, tag + ".jsonl")
    with open(batch_path, "w", encoding="utf-8") as f:
        json.dump(items, f)
    env = child_env(mode)
    if extra_env:
        env.update(extra_env)
    started = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", batch_path, out_path],
                              env=env, capture_output=True, text=True, timeout=timeout, cwd=HERE)
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as e:
        timed_out = True
        rc = None
        stderr = (e.stderr or b"").decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    records, started_seeds, stats, header, done = {}, [], None, None, False
    if os.path.exists(out_path):
        with open(out_path, encoding="utf-8") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    break  # a line cut short by a crash
                if "start" in obj:
                    started_seeds.append(obj["start"])
                elif "seed" in obj:
                    records[obj["seed"]] = obj
                elif "stats" in obj:
                    stats = obj["stats"]
                elif "child" in obj:
                    header = obj
                elif obj.get("done"):
                    done = True
    for p in (batch_path, out_path):
        with contextlib.suppress(OSError):
            os.remove(p)
    crash = None
    if not done or rc != 0:
        unfinished = [s for s in started_seeds if s not in records]
        crash = {"seed": unfinished[0] if unfinished else None, "returncode": rc,
                 "timed_out": timed_out, "stderr": stderr[-4000:],
                 "seconds": round(time.monotonic() - started, 1)}
    return {"records": records, "stats": stats, "header": header, "crash": crash}


def run_mode(mode: str, items: list, workdir: str, *, extra_env=None) -> dict:
    """All of `items` under `mode`, starting a new child after the seed a
    child crashed or hung on."""
    records, crashes, stats, headers = {}, {}, [], []
    remaining = list(items)
    while remaining:
        res = run_child(mode, remaining, workdir, timeout=120 + 5 * len(remaining), extra_env=extra_env)
        records.update(res["records"])
        if res["stats"] is not None:
            stats.append(res["stats"])
        if res["header"] is not None:
            headers.append(res["header"])
        crash = res["crash"]
        if crash is None:
            break
        if crash["seed"] is None:
            # died outside any program (start-up, stats, exit)
            crashes[None] = crash
            break
        crashes[crash["seed"]] = crash
        idx = next(i for i, it in enumerate(remaining) if it["seed"] == crash["seed"])
        remaining = remaining[idx + 1:]
    return {"records": records, "crashes": crashes, "stats": stats, "headers": headers}


def _diff(a: str, b: str, label: str, limit: int = 60) -> str:
    lines = list(difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True),
                                      f"{label} (plain)", f"{label} (tier1)", n=2))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... ({len(lines) - limit} more diff lines)\n"]
    return "".join(lines)


def compare(plain: dict | None, tier1: dict | None, plain_crash: dict | None = None,
            tier1_crash: dict | None = None) -> list[str]:
    """What differs between the two records of one seed ([] if nothing)."""
    problems = []
    if plain is None or tier1 is None:
        for name, rec, crash in (("plain", plain, plain_crash), ("tier1", tier1, tier1_crash)):
            if rec is None:
                if crash:
                    how = "hung (timed out)" if crash.get("timed_out") else f"crashed (exit status {crash.get('returncode')})"
                    problems.append(f"{name} child {how} on this program\nstderr (tail):\n{crash.get('stderr', '')}\n")
                else:
                    problems.append(f"{name}: no result for this program\n")
        return problems
    if plain.get("sha") != tier1.get("sha"):
        problems.append(f"program text differs: sha {plain.get('sha')} vs {tier1.get('sha')}\n")
    for key in ("out", "err"):
        if plain.get(key) != tier1.get(key):
            problems.append(f"{key} differs:\n" + _diff(plain.get(key) or "", tier1.get(key) or "", key))
    if plain.get("exc") != tier1.get("exc"):
        problems.append(f"escaping exception differs:\n  plain: {plain.get('exc')}\n  tier1: {tier1.get('exc')}\n")
    return problems


def write_divergence(div_dir: str, seed: int, src: str, problems: list[str], plain: dict | None,
                     tier1: dict | None, command: str) -> str:
    os.makedirs(div_dir, exist_ok=True)
    with open(os.path.join(div_dir, f"{seed}.py"), "w", encoding="utf-8") as f:
        f.write(src)
    path = os.path.join(div_dir, f"{seed}.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"seed {seed}: the interpreter and tier 1 differ\n")
        f.write(f"reproduce: {command}\n\n")
        for p in problems:
            f.write(p if p.endswith("\n") else p + "\n")
        for name, rec in (("plain", plain), ("tier1", tier1)):
            f.write(f"\n===== {name} =====\n")
            if rec is None:
                f.write("(no result)\n")
                continue
            f.write(f"exception: {rec.get('exc')}\n--- stdout ---\n{rec.get('out')}\n--- stderr ---\n{rec.get('err')}\n")
    return path


SHOW_RE = re.compile(r"^\S+ ([=!]) ", re.M)


def run_batch(seeds: list[int], *, workdir: str, div_dir: str | None, extra_env=None,
              second: str = "tier1", repro_suffix: str = "") -> dict:
    import gen
    items, tracing = [], []
    units = collections.Counter()
    for s in seeds:
        src, meta = gen.generate(s)
        # Programs that switch tracing on run last in their child: once
        # tracing has been on in a process, Ember runs every code object once
        # in the interpreter before compiling it, so code that runs only once
        # (module bodies...) would no longer be compiled at all.
        (tracing if "trace" in meta["units"] else items).append({"seed": s, "src": src})
        units.update(meta["units"])
    items += tracing
    t0 = time.monotonic()
    plain = run_mode("plain", items, workdir)
    t_plain = time.monotonic() - t0
    tier1 = run_mode(second, items, workdir, extra_env=extra_env)
    t_tier1 = time.monotonic() - t0 - t_plain
    divergences = []
    returned = raised = 0
    for it in items:
        s = it["seed"]
        p, t = plain["records"].get(s), tier1["records"].get(s)
        problems = compare(p, t, plain["crashes"].get(s), tier1["crashes"].get(s))
        if p is not None:
            for m in SHOW_RE.finditer(p["out"]):
                if m.group(1) == "=":
                    returned += 1
                else:
                    raised += 1
        if problems:
            path = None
            if div_dir:
                path = write_divergence(div_dir, s, it["src"], problems, p, t, repeat_command(f"{s}:{s + 1}", 1, 1) + repro_suffix)
            divergences.append({"seed": s, "problems": problems, "file": path})
    for key, crash in list(plain["crashes"].items()) + list(tier1["crashes"].items()):
        if key is None:
            divergences.append({"seed": None, "problems": [f"a child failed outside any program: {crash}"],
                                "file": None})
    compiled = ran = handoffs = 0
    reasons = collections.Counter()
    enabled = bool(tier1["stats"]) and all(st["enabled"] for st in tier1["stats"])
    for st in tier1["stats"]:
        for v in st["per_seed"].values():
            compiled += v["compiled"]
            ran += v["ran"]
            handoffs += v["handoffs"]
            reasons.update(v["reasons"])
    ms_plain = sum(r["ms"] for r in plain["records"].values())
    ms_tier1 = sum(r["ms"] for r in tier1["records"].values())
    return {"seeds": seeds, "programs": len(items), "divergences": divergences, "compiled": compiled,
            "ran": ran, "handoffs": handoffs, "reasons": reasons, "enabled": enabled, "units": units,
            "returned": returned, "raised": raised, "t_plain": t_plain, "t_tier1": t_tier1,
            "ms_plain": ms_plain, "ms_tier1": ms_tier1}


def repeat_command(seeds: str, jobs: int, batch: int) -> str:
    return f"dev/env python tests/fuzz/run.py --seeds {seeds} --jobs {jobs} --batch {batch}"


def parse_seeds(text: str) -> list[int]:
    m = re.fullmatch(r"(\d+):(\d+)", text.strip())
    if not m:
        raise argparse.ArgumentTypeError("--seeds wants START:END (END excluded)")
    a, b = int(m.group(1)), int(m.group(2))
    if b <= a:
        raise argparse.ArgumentTypeError("--seeds: END must be greater than START")
    return list(range(a, b))


def run_seeds(seeds: list[int], *, jobs: int = 1, batch: int = 100, div_dir: str | None = DEFAULT_DIVERGENCE_DIR,
              extra_env=None, progress=None, second: str = "tier1", repro_suffix: str = "") -> dict:
    """Run every seed; the aggregated result (see run_batch). second="plain"
    compares the interpreter with itself (a determinism check of the
    generated programs)."""
    workdir = tempfile.mkdtemp(prefix="ember-fuzz-")
    batches = [seeds[i:i + batch] for i in range(0, len(seeds), batch)]
    total = {"programs": 0, "divergences": [], "compiled": 0, "ran": 0, "handoffs": 0,
             "reasons": collections.Counter(), "enabled": True, "units": collections.Counter(),
             "returned": 0, "raised": 0, "ms_plain": 0.0, "ms_tier1": 0.0, "batches": 0}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futs = [pool.submit(run_batch, b, workdir=workdir, div_dir=div_dir, extra_env=extra_env, second=second,
                                repro_suffix=repro_suffix)
                    for b in batches]
            for fut in concurrent.futures.as_completed(futs):
                res = fut.result()
                total["batches"] += 1
                for k in ("programs", "compiled", "ran", "handoffs", "returned", "raised", "ms_plain", "ms_tier1"):
                    total[k] += res[k]
                total["divergences"].extend(res["divergences"])
                total["reasons"].update(res["reasons"])
                total["units"].update(res["units"])
                total["enabled"] = total["enabled"] and res["enabled"]
                if progress:
                    progress(res, total, len(batches))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total["divergences"].sort(key=lambda d: (d["seed"] is None, d["seed"] or 0))
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=parse_seeds, required=True, help="START:END, END excluded")
    ap.add_argument("--jobs", type=int, default=1, help="batches run at the same time (default 1)")
    ap.add_argument("--batch", type=int, default=100, help="programs per child process (default 100)")
    ap.add_argument("--divergence-dir", default=DEFAULT_DIVERGENCE_DIR,
                    help="where diverging programs are written (default tests/fuzz/divergences)")
    ap.add_argument("--summary-json", help="also write the summary as JSON to this file")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    ap.add_argument("--determinism-check", action="store_true",
                    help="run every program twice under plain CPython instead (checks the generator: "
                         "any difference is nondeterminism in the generated programs, not a bug in Ember)")
    ap.add_argument("--threshold", type=int, default=0,
                    help="EMBER_TIER1_THRESHOLD of the tier1 child (default 0, the acceptance setting: "
                         "every code object compiled at its first call)")
    args = ap.parse_args(argv)
    seeds = args.seeds
    seed_text = f"{seeds[0]}:{seeds[-1] + 1}"
    command = repeat_command(seed_text, args.jobs, args.batch)
    t0 = time.monotonic()

    def progress(res, total, nbatches):
        if args.quiet:
            return
        el = time.monotonic() - t0
        print(f"[{total['batches']}/{nbatches}] seeds {res['seeds'][0]}:{res['seeds'][-1] + 1}: "
              f"{len(res['divergences'])} divergences, {res['compiled']} code objects compiled at tier 1 "
              f"(plain {res['t_plain']:.1f}s, tier1 {res['t_tier1']:.1f}s); total {total['programs']} programs, "
              f"{len(total['divergences'])} divergences, {el:.0f}s", flush=True)
        for d in res["divergences"]:
            print(f"    DIVERGENCE seed {d['seed']}: {d['problems'][0].splitlines()[0]}"
                  + (f" -> {d['file']}" if d["file"] else ""), flush=True)

    second = "plain" if args.determinism_check else "tier1"
    extra_env = None
    suffix = ""
    if args.determinism_check:
        suffix = " --determinism-check"
    elif args.threshold:
        suffix = f" --threshold {args.threshold}"
        extra_env = {"EMBER_TIER1_THRESHOLD": str(args.threshold)}
    command += suffix
    total = run_seeds(seeds, jobs=args.jobs, batch=args.batch, div_dir=args.divergence_dir, progress=progress,
                      second=second, extra_env=extra_env, repro_suffix=suffix)
    wall = time.monotonic() - t0
    ndiv = len(total["divergences"])
    calls = total["returned"] + total["raised"]
    print()
    print("ember fuzz summary")
    print(f"  seeds:                {seed_text} (generator gen_version {__import__('gen').GEN_VERSION})")
    print(f"  programs run:         {total['programs']} (each under plain CPython and under "
          f"{'plain CPython again' if args.determinism_check else f'tier 1 at threshold {args.threshold}'})")
    print(f"  divergences:          {ndiv}")
    print(f"  code objects of the programs that ran under Ember: {total['ran']}")
    print(f"  code objects compiled at tier 1: {total['compiled']}")
    print(f"  tier-1 hand-offs to the interpreter: {total['handoffs']}")
    if total["reasons"]:
        print(f"  left in the interpreter: {dict(total['reasons'].most_common())}")
    print(f"  driver calls:         {calls} ({total['returned']} returned, {total['raised']} raised)")
    print(f"  units:                {dict(sorted(total['units'].items()))}")
    print(f"  program time:         plain {total['ms_plain'] / 1000:.1f}s, tier1 {total['ms_tier1'] / 1000:.1f}s")
    print(f"  wall time:            {wall:.1f}s")
    print(f"  repeat with:          {command}")
    for d in total["divergences"]:
        print(f"  DIVERGENCE seed {d['seed']}: {d['file'] or ''}")
        for p in d["problems"]:
            print("    " + p.rstrip().replace("\n", "\n    ")[:3000])
    failed = False
    if ndiv:
        failed = True
    if args.determinism_check:
        print("  (determinism check: plain CPython against itself; Ember did not run)")
    elif not total["enabled"]:
        print("FAIL: Ember was not enabled in a tier1 child")
        failed = True
    elif total["compiled"] == 0:
        print("FAIL: no code object of the programs was compiled at tier 1: this run tested nothing")
        failed = True
    if args.summary_json:
        with open(args.summary_json, "w", encoding="utf-8") as f:
            json.dump({"seeds": seed_text, "gen_version": __import__("gen").GEN_VERSION,
                       "programs": total["programs"], "divergences": [d["seed"] for d in total["divergences"]],
                       "ran": total["ran"], "compiled": total["compiled"], "handoffs": total["handoffs"],
                       "reasons": dict(total["reasons"]), "returned": total["returned"],
                       "raised": total["raised"], "units": dict(total["units"]), "wall_s": round(wall, 1),
                       "command": command}, f, indent=1)
    print("FAIL" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2], sys.argv[3]))
    sys.exit(main())
