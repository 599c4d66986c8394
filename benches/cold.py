"""Cold-run driver: python benches/cold.py RESULT.json SCRIPT [ARGS...]

Runs a pyperformance benchmark script (SCRIPT ARGS as pyperformance would)
with pyperf's Runner made to call each benchmark function exactly once
(loops=1, no warm-up, no worker processes), then writes to RESULT.json the
in-process time of each call and the facts of the configuration that ran
(benches/site/ebench.py). The runner (benches/run.py) times the whole process
from outside; this file only adds what can be seen from inside.
"""

import os
import sys
import time


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    t_main = time.perf_counter()

    import pyperf

    calls = []

    def run_once(self, task):
        if task.name in self._bench_names:
            raise ValueError(f"duplicated benchmark name: {task.name!r}")
        self._bench_names.add(task.name)
        self.parse_args()
        t0 = time.perf_counter()
        value = task.task_func(task, 1)
        calls.append({"name": task.name, "value": float(value),
                      "call_wall": time.perf_counter() - t0})
        self._worker_task += 1
        return None

    pyperf.Runner._main = run_once

    import runpy

    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    runpy.run_path(script, run_name="__main__")
    t_end = time.perf_counter()

    import json

    import ebench

    with open(out, "w", encoding="utf-8") as f:
        json.dump({"calls": calls, "main_wall": t_end - t_main, "facts": ebench.facts()}, f)


if __name__ == "__main__":
    main()
