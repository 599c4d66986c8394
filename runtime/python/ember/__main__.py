"""python -m ember [options] (script.py | -m module | -c code) [args...]

Runs a program with Ember on, as `python script.py` would run it.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys

import ember
from ember import _config


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m ember",
        description="Run a Python program with the Ember JIT on.",
        epilog="Environment variables (EMBER_*) are documented in docs/usage.md.",
    )
    p.add_argument("--stats", action="store_true",
                   help="print a summary of what Ember did when the program exits")
    p.add_argument("--stats-json", metavar="PATH",
                   help="write ember.stats() as JSON to PATH at exit (as EMBER_STATS does)")
    p.add_argument("--version", action="version", version=f"ember {ember.__version__}")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("-m", dest="module", metavar="MODULE", help="run a library module as a script")
    target.add_argument("-c", dest="command", metavar="CODE", help="run a program passed as a string")
    target.add_argument("script", nargs="?", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the program")
    return p


def print_summary(out=sys.stderr, top: int = 15) -> None:
    s = ember.stats()
    g = s["global"]
    by_tier = ", ".join(f"tier {t}: {n}" for t, n in sorted(g["code_objects_by_tier"].items()))
    print(f"ember: {g['frames']} frames, {g['code_objects_seen']} code objects seen "
          f"({g['code_objects_live']} live; {by_tier})", file=out)
    rows = s["functions"][:top]
    if rows:
        print(f"ember: {'calls':>10} {'tier':>4}  function", file=out)
    for f in rows:
        where = f"{os.path.basename(f['filename'])}:{f['firstlineno']}"
        print(f"ember: {f['calls']:>10} {f['tier']:>4}  {f['qualname']} ({where})", file=out)


def main(argv=None) -> None:
    ns = _parser().parse_args(argv)
    if ns.stats_json:
        try:
            _config._path("--stats-json", ns.stats_json)
        except _config.ConfigError as e:
            _parser().error(str(e))

    on = False
    try:
        cfg = _config.from_environ()
    except _config.ConfigError as e:
        _config.report(e)
    else:
        try:
            ember.enable()
            on = True
        except RuntimeError as e:
            print(f"ember: {e}; Ember stays off", file=sys.stderr)
        if on and cfg.stats_path:
            ember._write_stats_at_exit(cfg.stats_path)
    if on and ns.stats_json:
        ember._write_stats_at_exit(ns.stats_json)
    if on and ns.stats:
        import atexit
        atexit.register(print_summary)

    if ns.module:
        sys.argv = [ns.module, *ns.args]
        runpy.run_module(ns.module, run_name="__main__", alter_sys=True)
    elif ns.command is not None:
        sys.argv = ["-c", *ns.args]
        sys.path[0] = ""
        code = compile(ns.command, "<string>", "exec")
        exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
    else:
        sys.argv = [ns.script, *ns.args]
        sys.path[0] = os.path.dirname(os.path.abspath(ns.script))
        runpy.run_path(ns.script, run_name="__main__")


if __name__ == "__main__":
    main()
