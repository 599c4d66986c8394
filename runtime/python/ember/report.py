"""Reading Ember's stats: the summary ``python -m ember --stats`` prints at
exit, and a reader for ``EMBER_STATS`` files (docs/stats.md)::

    python -m ember.report FILE [--top N] [--sort calls|resumes|back_edges|handoffs|compile_time|code_size]

Prints the totals and the top functions of a stats file (one written by
``EMBER_STATS=path.json``, ``python -m ember --stats-json path.json`` or
``ember.write_stats``).
"""

from __future__ import annotations

# Only what the exit-time summary needs at import: loading more (argparse
# imports re and enum) would show up in the very stats being summarised.
import os
import sys

SCHEMA = "ember-stats"
SCHEMA_VERSION = 1

SORT_KEYS = {
    "calls": lambda f: f["calls"],
    "resumes": lambda f: f["resumes"],
    # Unknown (never compiled) sorts below zero.
    "back_edges": lambda f: -1 if f.get("back_edges") is None else f["back_edges"],
    "handoffs": lambda f: f.get("handoffs", 0),
    # All of its tier-1 compilations, recompilations included.
    "compile_time": lambda f: _compile_ns(f),
    "code_size": lambda f: (f.get("tier1") or {}).get("code_bytes", 0),
}


def _compile_ns(f: dict) -> int:
    # Files written before "compile_ns" per tier existed (same schema
    # version: fields are only ever added) have the current code's only.
    per_tier = f.get("compile_ns")
    if per_tier is not None:
        return per_tier["1"]
    return (f.get("tier1") or {}).get("compile_ns", 0)


def format_summary(stats: dict, top: int = 15, sort: str = "calls") -> list[str]:
    """The lines of a readable summary of a stats document."""
    g = stats["global"]
    by_tier = ", ".join(f"tier {t}: {n}" for t, n in sorted(g["code_objects_by_tier"].items()))
    lines = [f"{g['frames']} frames, {g['code_objects_seen']} code objects seen "
             f"({g['code_objects_live']} live; {by_tier})"]
    t1 = g.get("tier1")
    if t1 and t1["compiled"]:
        per = t1["compile_ns"] / t1["instructions"] if t1["instructions"] else 0
        publish = f", of which {t1['publish_ns'] / 1e6:.1f} ms publishing" if "publish_ns" in t1 else ""
        hot = f" ({t1['hot_bytes'] // 1024} KiB on common paths)" if "hot_bytes" in t1 else ""
        lines.append(f"tier 1: {t1['compiled']} compiled, {t1['instructions']} instructions in "
                     f"{t1['compile_ns'] / 1e6:.1f} ms ({per:.0f} ns each{publish}), "
                     f"{t1['code_bytes'] // 1024} KiB of code{hot}; {t1.get('back_edges', '?')} back-edges taken "
                     f"and {t1.get('handoffs', '?')} frames handed to the interpreter by compiled code")
    if t1 and t1.get("refused"):
        lines.append("stayed in the interpreter: " + ", ".join(
            f"{reason}: {n}" for reason, n in sorted(t1["refused"].items(), key=lambda kv: -kv[1])))
    if g.get("deopts"):
        lines.append("deopts: " + ", ".join(
            f"{reason}: {n}" for reason, n in sorted(g["deopts"].items(), key=lambda kv: -kv[1])))
    rows = sorted(stats["functions"], key=SORT_KEYS[sort], reverse=True)[:top]
    if rows:
        lines.append(f"{'calls':>10} {'resumes':>8} {'back-edges':>10} {'handoffs':>8} {'tier':>4} "
                     f"{'code':>7} {'compile':>9}  function")
    for f in rows:
        where = f"{os.path.basename(f['filename'])}:{f['firstlineno']}"
        c = f.get("tier1") or {}
        code = f"{c['code_bytes']}B" if c else "-"
        compile_ns = _compile_ns(f)
        compile_time = f"{compile_ns / 1000:.1f}us" if compile_ns else "-"
        back_edges = "-" if f.get("back_edges") is None else f["back_edges"]
        reason = f"  [{f['interpreter_reason']}]" if f.get("interpreter_reason") else ""
        lines.append(f"{f['calls']:>10} {f['resumes']:>8} {back_edges:>10} {f.get('handoffs', 0):>8} {f['tier']:>4} "
                     f"{code:>7} {compile_time:>9}  {f['qualname']} ({where}){reason}")
    return lines


def load(path: str) -> dict:
    """A stats file, checked to be one (schema name and version)."""
    import json

    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not an Ember stats file (no \"schema\": \"{SCHEMA}\")")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: stats schema version {data.get('schema_version')!r}; "
                         f"this Ember reads version {SCHEMA_VERSION}")
    return data


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m ember.report",
        description="Print the totals and top functions of an Ember stats file (EMBER_STATS).")
    parser.add_argument("file", help="a stats file (JSON, docs/stats.md)")
    parser.add_argument("--top", type=int, default=20, metavar="N", help="functions to show (default 20)")
    parser.add_argument("--sort", choices=sorted(SORT_KEYS), default="calls",
                        help="order of the functions (default: calls)")
    args = parser.parse_args(argv)
    if args.top < 0:
        parser.error("argument --top: must be 0 or more")
    try:
        data = load(args.file)
    except (OSError, ValueError) as e:
        print(f"python -m ember.report: {e}", file=sys.stderr)
        return 2
    for line in format_summary(data, top=args.top, sort=args.sort):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
