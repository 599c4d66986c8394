"""On-stack replacement: a frame the interpreter runs moves to compiled code
at one of its loops' back-edges (tier1/csrc/osr.c), under the default policy,
with everything observable as in the interpreter."""

import os
import subprocess
import sys
import textwrap


def run(source, tmp_path, ember=True, extra=None):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    if ember:
        env.update({"EMBER": "1", "EMBER_MAX_TIER": "1"})
    env.update(extra or {})
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


# Printed at the end of a program under Ember: frames moved, and whether
# the functions named are compiled.
REPORT = """
        import ember
        if ember.is_enabled():
            print("osr", ember.stats()["global"]["tier1"]["osr_entries"])
            for name in WATCHED:
                print(name, ember.is_compiled(globals()[name]))
"""


def split_report(out):
    body, _, report = out.partition("osr ")
    lines = report.split("\n")
    return body, int(lines[0]), {n: v == "True" for n, v in (line.split() for line in lines[1:] if line)}


def test_a_function_called_once_goes_on_in_compiled_code(tmp_path):
    # Called once: without on-stack replacement its loop runs in the
    # interpreter to the end and it is never compiled.
    source = """
        WATCHED = ["work"]

        class Point:
            def __init__(self, x):
                self.x = x

        def work(n):
            total = 0.0
            points = []
            for i in range(n):
                p = Point(i * 0.5)
                total += p.x * 2.0
                if i % 1000 == 0:
                    points.append(p)
            return total, len(points)

        print(work(300_000))
    """ + REPORT
    body, moved, compiled = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert moved >= 1 and compiled == {"work": True}


def test_a_frame_moved_to_compiled_code_raises_as_the_interpreter(tmp_path):
    # The exception leaves the frame in compiled code; the frame's caller
    # (here the interpreter's entry frame, then the module) sees it with the
    # same traceback, and a `finally` in the moved frame runs.
    source = """
        import traceback
        WATCHED = ["work", "outer"]

        def work(n):
            total = 0
            try:
                for i in range(n):
                    total += i % 7
                    if i == n - 1:
                        raise ValueError(f"at {i}: {total}")
            finally:
                print("finally", total)
            return total

        def outer(n):
            try:
                return work(n)
            except ValueError as e:
                print("caught", e, e.__traceback__.tb_next.tb_lineno)
                raise KeyError("again") from e

        try:
            outer(400_000)
        except KeyError:
            print(traceback.format_exc())
    """ + REPORT
    body, moved, compiled = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert "ValueError: at 399999" in body and "finally" in body
    assert moved >= 1 and compiled["work"]


def test_the_bytecode_reads_as_before(tmp_path):
    # ENTER_EXECUTOR replaces the back-edges in the quickened bytecode only:
    # co_code, code comparison, dis (adaptive too) and marshal see the loop.
    source = """
        import dis, io, marshal
        WATCHED = ["work"]

        def work(n):
            t = 0
            for i in range(n):
                t += i & 3
            return t

        before = work.__code__.co_code
        print(work(500_000))
        code = work.__code__
        print(code.co_code == before, code == code.replace(), marshal.loads(marshal.dumps(code)) == code)
        out = io.StringIO()
        dis.dis(work, adaptive=True, file=out)
        text = out.getvalue()
        print("ENTER_EXECUTOR" in text, "JUMP_BACKWARD" in text)
        print([i.opname for i in dis.get_instructions(work)][-8:])
    """ + REPORT
    body, moved, compiled = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert "True True True\nFalse True\n" in body
    assert moved >= 1 and compiled["work"]


def test_tracing_turned_on_in_a_moved_frame(tmp_path):
    # The frame runs compiled code when tracing starts: it goes back to the
    # interpreter, which reports every line from there on, as it would have.
    source = """
        import sys
        WATCHED = ["work"]
        lines = []

        def tracer(frame, event, arg):
            if frame.f_code.co_name == "work":
                lines.append((event, frame.f_lineno))
            return tracer

        def work(n):
            t = 0
            for i in range(n):
                t += i
                if i == n - 5:
                    sys.settrace(tracer)
                    sys._getframe().f_trace = tracer
            sys.settrace(None)
            return t

        print(work(300_000))
        print(lines)
    """ + REPORT
    body, moved, _ = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert "line" in body and moved >= 1


def test_monitoring_removes_the_entries(tmp_path):
    # sys.monitoring instruments the code: CPython clears its executors,
    # and the loop goes on, monitored, in the interpreter.
    source = """
        import sys
        WATCHED = ["work"]
        mon = sys.monitoring
        TOOL = 3
        jumps = []

        def work(n, watch_at):
            t = 0
            for i in range(n):
                t += i
                if i == watch_at:
                    mon.use_tool_id(TOOL, "test")
                    mon.register_callback(TOOL, mon.events.JUMP, lambda *a: jumps.append(1))
                    mon.set_local_events(TOOL, work.__code__, mon.events.JUMP)
            mon.set_local_events(TOOL, work.__code__, 0)
            mon.free_tool_id(TOOL)
            return t

        print(work(300_000, 299_000), len(jumps))
    """ + REPORT
    body, moved, _ = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert moved >= 1


def test_recursion_and_generators_around_moved_frames(tmp_path):
    # Frames moved at a back-edge call back into code that loops, recurse,
    # and drive generators; generator frames are not moved this way (they
    # move at a resumption).
    source = """
        WATCHED = ["walk", "gen"]

        def gen(n):
            for i in range(n):
                yield i * i

        def walk(depth, n):
            s = 0
            for i in range(n):
                s += i
            if depth:
                s += walk(depth - 1, n // 2)
            for v in gen(n // 10):
                s ^= v
            return s

        print(walk(6, 400_000))
    """ + REPORT
    body, moved, compiled = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert moved >= 1 and compiled["walk"]


def test_no_move_with_a_threshold_set(tmp_path):
    # With EMBER_TIER1_THRESHOLD set, code compiles by call count only (as
    # documented): nothing is put at back-edges.
    source = """
        WATCHED = ["work"]

        def work(n):
            t = 0
            for i in range(n):
                t += i
            return t

        print(work(300_000))
    """ + REPORT
    body, moved, compiled = split_report(run(source, tmp_path, extra={"EMBER_TIER1_THRESHOLD": "5"}))
    assert body == run(source, tmp_path, ember=False)
    assert moved == 0 and compiled == {"work": False}


def test_a_loop_of_few_long_iterations_stays_in_the_interpreter(tmp_path):
    # Time alone would compile these: each iteration waits in C (as start-up
    # code reading files does). Compiling speeds up bytecode, not the wait,
    # so the default policy also asks for iterations: none go round enough.
    source = """
        import time
        WATCHED = ["few", "few_gen", "consume"]

        def few(n):
            t = 0
            for i in range(n):
                time.sleep(0.002)
                t += i
            return t

        def few_gen(n):
            for i in range(n):
                time.sleep(0.002)
                yield i

        def consume():
            return sum(few_gen(20))

        print(few(20), few(20), consume(), consume())
    """ + REPORT
    body, moved, compiled = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert compiled == {"few": False, "few_gen": False, "consume": False}


def test_a_generator_that_loops_long_between_yields_is_compiled(tmp_path):
    # Its frames cannot move to compiled code at a back-edge, and it yields
    # rarely: the iterations its loop makes in the interpreter count all the
    # same, and it is compiled at a resumption.
    source = """
        WATCHED = ["rare"]

        def rare(n):
            t = 0
            for i in range(n):
                t += i % 7
                if i % 100_000 == 99_999:
                    yield t

        print(list(rare(600_000)))
    """ + REPORT
    body, moved, compiled = split_report(run(source, tmp_path))
    assert body == run(source, tmp_path, ember=False)
    assert compiled == {"rare": True}
