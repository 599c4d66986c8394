"""Run CPython's regrtest exactly as ``python -m test ARGS`` does, and also
record every test module's result as one JSON line in RECORD.

    python _regrtest_driver.py RECORD [regrtest options and test names...]

Used by regrtest.py (next to this file). regrtest's own outputs (the
``--junit-xml`` file, its summary on stdout) do not say *how* a test module
failed: a module that crashed its worker process or timed out has no entry in
the JUnit file at all, and the summary lumps failed, crashed and timed-out
modules together. The record does: it wraps TestResults.accumulate_result(),
the one place where the main regrtest process receives every module's result
(from a worker with -jN, or in-process without), and writes the module's
state, duration, counts, the ids of its failed and erroring tests, and the
per-testcase JUnit XML the worker produced (present only with --junit-xml).

Nothing here runs inside the tests: with -jN the tests run in worker
processes started as ``python -m test.libregrtest.worker``, which never
import this file.
"""

import json
import os
import re
import sys

# faulthandler's line when regrtest's --timeout fires in a worker, which then
# exits with code 1: regrtest reports the module as a worker failure.
TIMEOUT_LINE = re.compile(r"^Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!$", re.M)
FATAL_LINE = re.compile(r"^Fatal Python error: .*$", re.M)
# With -R (--huntrleaks), what regrtest's refleak.py prints for a module whose
# every counted repetition leaked: "test_x leaked [1, 1, 1] references, sum=3"
# (also memory blocks, file descriptors). The lines it prints for deltas that
# are not all positive end in "(this is fine)" and do not match.
REFLEAK_LINE = re.compile(
    r"^\S+ leaked \[[-\d, ]*\] (?:references|memory blocks|file descriptors), sum=-?\d+$", re.M)


def main() -> None:
    record_path = sys.argv.pop(1)
    # `python -m test` puts the working directory first on sys.path, not the
    # directory of a script: do the same.
    sys.path[0] = os.getcwd()

    from test.libregrtest import results as regrtest_results

    cls = regrtest_results.TestResults
    original = cls.accumulate_result
    record = open(record_path, "a", encoding="utf-8")

    def accumulate_result(self, result, runtests, *args, **kwargs):
        try:
            stats = result.stats
            entry = {
                "kind": "result",
                "test": result.test_name,
                "state": result.state,
                "duration": result.duration,
                "rerun": bool(getattr(runtests, "rerun", False)),
                "stats": None if stats is None else {
                    "tests_run": stats.tests_run,
                    "failures": stats.failures,
                    "skipped": stats.skipped,
                },
                "errors": [name for name, _ in (result.errors or [])],
                "failures": [name for name, _ in (result.failures or [])],
                "error_details": [list(e) for e in (result.errors or [])],
                "failure_details": [list(f) for f in (result.failures or [])],
                "env_changed_reasons": list(result.env_changed_reasons or []),
                "xml": list(result.xml_data or []),
            }
            record.write(json.dumps(entry) + "\n")
            record.flush()
        except Exception as exc:  # never let the recorder break the run
            print(f"regrtest driver: could not record {result!r}: {exc!r}",
                  file=sys.stderr, flush=True)
        return original(self, result, runtests, *args, **kwargs)

    cls.accumulate_result = accumulate_result

    # With -jN, the worker's output and regrtest's error message for a module
    # that did not pass: tells a timeout from a crash, and says why.
    from test.libregrtest import run_workers
    workers_cls = run_workers.RunWorkers
    original_display = workers_cls.display_result

    def display_result(self, mp_result, *args, **kwargs):
        try:
            result = mp_result.result
            if result.state != "PASSED":
                out = mp_result.worker_stdout or ""
                fatal = FATAL_LINE.search(out)
                entry = {
                    "kind": "output",
                    "test": result.test_name,
                    "state": result.state,
                    "err_msg": mp_result.err_msg,
                    "timed_out": bool(TIMEOUT_LINE.search(out)),
                    "fatal_error": fatal.group(0) if fatal else None,
                    "refleaks": REFLEAK_LINE.findall(out),
                    "stdout_tail": out[-3000:],
                }
                record.write(json.dumps(entry) + "\n")
                record.flush()
        except Exception as exc:
            print(f"regrtest driver: could not record output: {exc!r}",
                  file=sys.stderr, flush=True)
        return original_display(self, mp_result, *args, **kwargs)

    workers_cls.display_result = display_result

    from test.libregrtest.main import main as regrtest_main
    regrtest_main(_add_python_opts=True)


if __name__ == "__main__":
    main()
