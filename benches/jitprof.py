"""Where tier 1's machine code is executed, and where it misses the
instruction cache: per stencil (or per instruction), the instructions run,
the level-1 instruction-cache misses (cachegrind's model of this machine's
cache, through callgrind) and the bytes of code that ran at least once, hot
paths and cold parts apart (ember.dis places each cold part under its
instruction).

    dev/env python benches/jitprof.py BENCH [--iterations N] [--by stencil|instruction]
        [--top K] [--all] [--keep DIR]

BENCH is one of the dev set's benchmarks (benches/iterate.py). The process,
`python -m ember` with EMBER_MAX_TIER=1 and PYTHONHASHSEED=0, runs N
iterations (3) under `valgrind --tool=callgrind --cache-sim=yes
--dump-instr=yes`, then writes ember.dis of every compiled code object of
the benchmark's module (with --all, of every function alive). Counts cover the whole process (start-up and warm-up
included), so the shares, not the totals, are what to compare. A run in
which nothing was compiled fails.

What it is for: tier 1 copies a stencil per instruction, so a program's
hot code is far larger than the interpreter's loop, which all functions
share; on this machine's 32 KiB level-1 instruction cache that, more than
the instructions executed, is what richards, chaos and nqueens pay for
(benches/README.md).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def child(bench: str, iterations: int, dis_path: str, everything: bool) -> None:
    """In the profiled process: run the benchmark, then disassemble the
    compiled code of its module (of every function with `everything`)."""
    import gc
    import types

    sys.path.insert(0, HERE)
    import ember
    import iterate

    module = iterate.load(bench)
    run = iterate.ITERATION[bench](module)
    for _ in range(iterations):
        run()
    codes: dict[int, types.CodeType] = {}

    def walk(code: types.CodeType) -> None:
        if id(code) in codes:
            return
        codes[id(code)] = code
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType) and (everything or obj.__code__.co_filename == module.__file__):
            walk(obj.__code__)
    with open(dis_path, "w", encoding="utf-8") as f:
        for code in codes.values():
            if ember.is_compiled(code):
                ember.dis(code, file=f)


HEADER = re.compile(r"\s+(\d+) (\S+).*\[(stencil|cold part of) (\S+)\]$")
SHARED_EXIT = re.compile(r"\s+shared exit\s+\[cold part of (\S+)\]$")
CODE = re.compile(r"\s+0x([0-9a-f]+)\s+((?:[0-9a-f]{2} )+)")


def read_dis(path: str) -> tuple[dict[int, tuple[str, str, str, str]], dict[int, int], int]:
    """Address -> (function, "offset opname", stencil, section), the length
    of each instruction, and the number of code objects."""
    where: dict[int, tuple[str, str, str, str]] = {}
    length: dict[int, int] = {}
    function, what, stencil, section = "?", "?", "?", "hot"
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("tier-1 code of "):
                function = line[len("tier-1 code of "):].split(" (", 1)[0]
                section, n = "hot", n + 1
                continue
            if line.startswith("  shared exits:"):
                what, stencil, section = "-", "shared exits", "exits"
                continue
            if line.startswith("  cold paths:"):
                section = "cold"
                continue
            m = HEADER.match(line.rstrip("\n"))
            if m:
                what, stencil = f"{m.group(1)} {m.group(2)}", m.group(4)
                continue
            m = SHARED_EXIT.match(line.rstrip("\n"))
            if m:
                what, stencil = "-", m.group(1)
                continue
            m = CODE.match(line)
            if m:
                addr = int(m.group(1), 16)
                where[addr] = (function, what, stencil, section)
                length[addr] = len(m.group(2).split())
    return where, length, n


def read_callgrind(path: str) -> tuple[list[str], dict[int, list[int]], list[int]]:
    """Events, per-address costs (--dump-instr=yes; the inclusive costs on
    the line after each calls= are skipped), and the totals."""
    events: list[str] = []
    cost: dict[int, list[int]] = collections.defaultdict(lambda: [0] * len(events))
    totals: list[int] = []
    last = 0
    skip = False
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            c = line[0]
            if c == "e" and line.startswith("events:"):
                events = line.split()[1:]
                continue
            if c in "st" and (line.startswith("summary:") or line.startswith("totals:")):
                totals = [int(x) for x in line.split()[1:]]
                continue
            if c == "c" and line.startswith("calls="):
                skip = True
                continue
            if not (c == "0" or c == "+" or c == "-" or c == "*"):
                continue
            fields = line.split()
            token = fields[0]
            if token.startswith("0x"):
                addr = int(token, 16)
            elif c == "+":
                addr = last + int(token[1:])
            elif c == "-":
                addr = last - int(token[1:])
            else:
                addr = last
            last = addr
            if skip:
                skip = False
                continue
            row = cost[addr]
            for i, v in enumerate(fields[1:1 + len(events)]):
                row[i] += int(v)
    return events, cost, totals


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench", nargs="?")
    p.add_argument("--iterations", "-n", type=int, default=3)
    p.add_argument("--by", choices=("stencil", "instruction"), default="stencil")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--all", action="store_true",
                   help="every compiled code object, not only the benchmark module's")
    p.add_argument("--keep", help="directory to keep the callgrind output and the disassembly in")
    p.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2], args.child[3] == "all")
        return 0
    sys.path.insert(0, HERE)
    import iterate

    if args.bench is None:
        p.error("a benchmark is needed")
    if args.bench not in iterate.ITERATION:
        p.error(f"unknown benchmark {args.bench!r}; one of: {', '.join(iterate.ITERATION)}")
    if shutil.which("valgrind") is None:
        p.error("valgrind is not installed")
    work = args.keep or tempfile.mkdtemp(prefix="jitprof-")
    os.makedirs(work, exist_ok=True)
    cg = os.path.join(work, f"{args.bench}.callgrind")
    dis = os.path.join(work, f"{args.bench}.dis")
    env = dict(os.environ, EMBER_MAX_TIER="1", PYTHONHASHSEED="0")
    env.pop("EMBER", None)
    cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--dump-instr=yes", "--dump-line=no",
           f"--callgrind-out-file={cg}", sys.executable, "-m", "ember", os.path.abspath(__file__),
           "--child", args.bench, str(args.iterations), dis, "all" if args.all else "module"]
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        print(f"jitprof: the profiled process failed ({r.returncode})", file=sys.stderr)
        return 1
    where, length, n_code = read_dis(dis)
    if n_code == 0:
        print(f"jitprof: nothing was compiled at tier 1 running {args.bench}: no result", file=sys.stderr)
        return 1
    events, cost, totals = read_callgrind(cg)
    ir, miss = events.index("Ir"), events.index("I1mr")
    rows: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0, 0, 0])
    jit_ir = jit_miss = hot_bytes = cold_bytes = 0
    for addr, c in cost.items():
        w = where.get(addr)
        if w is None:
            continue
        function, what, stencil, section = w
        key = (stencil if args.by == "stencil" else f"{function} {what} [{stencil}]", section)
        row = rows[key]
        row[0] += c[ir]
        row[1] += c[miss]
        row[2] += length[addr]
        jit_ir += c[ir]
        jit_miss += c[miss]
        if section == "hot":
            hot_bytes += length[addr]
        else:
            cold_bytes += length[addr]
    total_ir, total_miss = totals[ir], totals[miss]
    print(f"{args.bench}, {args.iterations} iterations, whole process: {total_ir / 1e6:.1f}M instructions, "
          f"{total_miss:,} I1 misses; {n_code} code objects compiled at tier 1")
    print(f"tier-1 code: {jit_ir / 1e6:.1f}M instructions ({jit_ir / total_ir:.0%}), {jit_miss:,} I1 misses "
          f"({jit_miss / max(total_miss, 1):.0%}); bytes that ran: {hot_bytes:,} of hot paths, "
          f"{cold_bytes:,} of cold parts and exits (L1i: 32 KiB)\n")
    print(f"| {'stencil' if args.by == 'stencil' else 'function, instruction [stencil]'} | part | "
          "instructions | I1 misses | bytes that ran |")
    print("|---|---|---:|---:|---:|")
    for (name, section), (i, m, b) in sorted(rows.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"| {name} | {section} | {i:,} | {m:,} | {b:,} |")
    if args.keep:
        print(f"\ncallgrind output and disassembly in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
