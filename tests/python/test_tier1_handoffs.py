"""Compiled code and the interpreter's specialisation: hand-offs stay rare."""

import os
import subprocess
import sys
import textwrap


def run(source, env_extra, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    env.update(env_extra)
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


def test_specialised_code_runs_without_hand_offs(tmp_path):
    # A guard that holds must not count as a miss: TO_BOOL_BOOL once ran its
    # generic path (and so the adaptive counter) on every execution, and from
    # then on every call handed its frame to the interpreter.
    source = """
        import ember

        class TaskState:
            def __init__(self):
                self.packet_pending = True
                self.task_waiting = False
                self.task_holding = False

            def holding_or_waiting(self):
                return self.task_holding or (not self.packet_pending and self.task_waiting)

        t = TaskState()
        for i in range(5000):
            t.holding_or_waiting()
        f = next(f for f in ember.stats()["functions"] if f["qualname"] == "TaskState.holding_or_waiting")
        print(f["tier"], f["calls"], f["handoffs"])
    """
    p = run(source, {"EMBER": "1", "EMBER_MAX_TIER": "1"}, tmp_path)
    assert p.returncode == 0, p.stderr
    tier, calls, handoffs = map(int, p.stdout.split())
    assert tier == 1 and calls == 5000
    # The interpreter specialises it in the first calls; after that, none.
    assert handoffs <= 3, handoffs
