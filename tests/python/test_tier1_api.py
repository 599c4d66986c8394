"""The tier-1 surface: compilation policy, pinning, is_compiled, dis, the
perf map and the stats of compiled code."""

import io
import json
import os
import platform
import re
import subprocess
import sys
import textwrap

import ember
import pytest


def run(source, env_extra, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    env.update(env_extra)
    return subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


def test_pin_to_tier1_compiles_and_runs(ember_on):
    def add(a, b):
        return a + b

    assert not ember.is_compiled(add)
    ember.pin(add, 1)
    # Two calls: once monitoring has been used in the process (other tests
    # do), the interpreter must run a code object once before it compiles.
    assert add(2, 3) == 5 and add(3, 4) == 7
    assert ember.is_compiled(add) and ember.tier_of(add) == 1
    entry = next(f for f in ember.stats()["functions"] if f["qualname"] == add.__qualname__)
    assert entry["tier"] == 1 and entry["tier1"]["code_bytes"] > 0 and entry["interpreter_reason"] is None
    ember.unpin(add)


def test_pin_to_interpreter_prevents_compilation(ember_on):
    def mul(a, b):
        return a * b

    ember.pin(mul, 0)
    for i in range(50):
        mul(i, i)
    assert not ember.is_compiled(mul) and ember.tier_of(mul) == 0
    ember.unpin(mul)


def test_threshold_policy(tmp_path):
    source = """
        import ember
        def f(x):
            return x + 1
        for i in range(3):
            f(i)
        print(ember.is_compiled(f))
        for i in range(3):
            f(i)
        print(ember.is_compiled(f))
    """
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "5"}, tmp_path)
    assert p.stdout == "False\nTrue\n", p.stderr
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "5", "EMBER_MAX_TIER": "0"}, tmp_path)
    assert p.stdout == "False\nFalse\n", p.stderr
    # Without any tier-1 setting, tier 1 is off (opt-in).
    p = run(source, {"EMBER": "1"}, tmp_path)
    assert p.stdout == "False\nFalse\n", p.stderr
    p = run(source, {"EMBER": "1", "EMBER_MAX_TIER": "1"}, tmp_path)
    assert p.stdout == "False\nFalse\n", p.stderr  # loop-free: default threshold 256 > 6 calls


def test_default_threshold_waits_longer_for_functions_without_loops(tmp_path):
    # A loop-free function is compiled at its 256th call; one with a loop
    # once its frames have run long enough in the interpreter: a long loop
    # during its first call (its frame goes on in compiled code from a
    # back-edge), a loop of a few iterations later (at the 256th at the
    # latest), as start-up code's loops.
    source = """
        import ember
        def plain(x):
            return x + 1
        def long_loop(n):
            s = 0
            for i in range(n):
                s += i
            return s
        def short_loop(n):
            s = 0
            for i in range(n):
                s += i
            if n < 0:
                # Never runs; makes the function long, so that compiling it
                # is worth more than its few instructions take anywhere
                # (under qemu too).
        DEAD_CODE
            return s
        first = {}
        for call in range(1, 1027):
            plain(call)
            if call <= 6:
                long_loop(100000)
            short_loop(3)
            for f in (plain, long_loop, short_loop):
                if ember.is_compiled(f):
                    first.setdefault(f.__name__, call)
        print(first.get("plain"), first.get("long_loop"), first.get("short_loop"))
    """
    source = source.replace("        DEAD_CODE\n", "".join(f"                s += n * {k}\n" for k in range(300)))
    p = run(source, {"EMBER": "1", "EMBER_MAX_TIER": "1"}, tmp_path)
    assert p.returncode == 0, p.stderr
    plain, long_loop, short_loop = map(int, p.stdout.split())
    assert (plain, long_loop) == (256, 1), p.stdout
    assert 2 < short_loop <= 256, p.stdout
    # A threshold that is set applies to every function, whatever it runs.
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "5"}, tmp_path)
    assert p.stdout == "5 5 5\n", p.stderr


def test_imports_run_without_the_evaluator_under_the_default_policy(tmp_path):
    # A module's body, and what it calls, run as in CPython without Ember
    # (inlined calls, nothing counted or compiled); Ember counts as on
    # meanwhile and is back once the import ends. With a threshold set,
    # imports are compiled like the rest.
    (tmp_path / "busy.py").write_text(textwrap.dedent("""
        import ember
        def plain(x):
            return x + 1
        for i in range(3000):
            plain(i)
        DURING = (ember.is_enabled(), ember.is_compiled(plain))
    """))
    source = """
        import ember
        import busy
        def calls(name):
            return sum(f["calls"] for f in ember.stats()["functions"] if f["qualname"] == name)
        before = calls("plain")
        for i in range(1100):
            busy.plain(i)
        print(*busy.DURING, before, calls("plain"), ember.is_compiled(busy.plain), ember.is_enabled())
    """
    p = run(source, {"EMBER": "1", "EMBER_MAX_TIER": "1"}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "True False 0 1100 True True\n", p.stdout
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "True True 3000 4100 True True\n", p.stdout
    # Turned off while an import runs, Ember stays off after it.
    (tmp_path / "busy.py").write_text("import ember\nDURING = (ember.disable(), ember.is_enabled())\n")
    p = run("import ember, busy\nprint(*busy.DURING, ember.is_enabled())\n", {"EMBER": "1"}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "True False False\n", p.stdout


def test_a_generator_called_once_is_compiled_while_it_is_resumed(tmp_path):
    # Under the default policy a function with a loop is compiled from its
    # second call, once it has run long enough in the interpreter: a
    # generator's single frame, resumed many times (a program's main
    # pipeline), counts its resumptions as well, and goes on in compiled
    # code at the resumption after it is compiled (a running frame needs
    # no more: compiled code can be entered at any yield).
    source = """
        import ember
        def numbers(n):
            total = 0
            for i in range(n):
                total += i * 3
                yield total
        gen = numbers(400_000)
        seen = []
        last = 0
        for k, v in enumerate(gen):
            last = v
            if k % 1000 == 0:
                seen.append(ember.is_compiled(numbers))
        expected = sum(i * 3 for i in range(400_000))
        calls = [f for f in ember.stats()["functions"] if f["qualname"] == "numbers"][0]
        print(seen[0], seen[-1], last == expected, calls["calls"])
    """
    p = run(source, {"EMBER": "1", "EMBER_MAX_TIER": "1"}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "False True True 1\n", p.stdout


def test_recompilation_waits_until_the_code_has_run_enough(tmp_path):
    # Types change every 50 calls, and the interpreter specialises the code
    # again each time. Tier 1 follows it twice at once (the first
    # specialisations of code compiled at its first call, and a first
    # change), then only after 256 calls and loop iterations since the last
    # compilation, a bar that doubles each time: not at every change.
    source = """
        import ember
        def f(a, b):
            return a * b + a
        for call in range(600):
            f(call, 2.0 if (call // 50) % 2 else 3)
        print(next(e["compiles"]["1"] for e in ember.stats()["functions"] if e["qualname"] == "f"))
    """
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert 3 <= int(p.stdout) <= 4, p.stdout


@pytest.mark.parametrize("var,value", [("EMBER_TIER1_THRESHOLD", "-1"), ("EMBER_TIER1_THRESHOLD", "x"),
                                       ("EMBER_MAX_TIER", "2"), ("EMBER_CODE_LIMIT_MB", "1.5"),
                                       ("EMBER_PERF_MAP", "yes")])
def test_bad_compile_settings_keep_ember_off(tmp_path, var, value):
    p = run("import ember; print(ember.is_enabled())", {"EMBER": "1", var: value}, tmp_path)
    assert p.stdout == "False\n"
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"ember: {var}=")


def test_dis_shows_machine_code_per_instruction(ember_on):
    def sub(a, b):
        return a - b

    out = io.StringIO()
    ember.dis(sub, file=out)
    assert "has no compiled code" in out.getvalue()
    ember.pin(sub, 1)
    sub(5, 3), sub(6, 3)
    out = io.StringIO()
    ember.dis(sub, file=out)
    text = out.getvalue()
    assert text.startswith("tier-1 code of ")
    assert re.search(r"^\s+0 RESUME", text, re.M)
    assert re.search(r"RETURN_VALUE\s+\[stencil RETURN_VALUE\]", text)
    # Every instruction line carries an address, its bytes and a mnemonic.
    lines = [l for l in text.splitlines() if l.startswith("    0x")]
    assert len(lines) > 10 and all(re.match(r"    0x[0-9a-f]+  ([0-9a-f]{2} ?)+\s+\S", l) for l in lines)
    if platform.machine() == "x86_64":
        # The stencils' rarely taken paths are placed after the exits.
        assert text.index("shared exits:") < text.index("cold paths:")
    ember.unpin(sub)


def test_dis_labels_every_cold_part_with_its_instruction(ember_on):
    # The rarely taken paths are listed after the shared exits, each under
    # the instruction whose stencil it belongs to; none is left unlabelled.
    class P:
        def __init__(self, x):
            self.x = x

    def get_x(p):
        return p.x + 1

    ember.pin(get_x, 1)
    try:
        for _ in range(3):
            get_x(P(1))
        assert ember.is_compiled(get_x)
        out = io.StringIO()
        ember.dis(get_x, file=out)
        text = out.getvalue()
        # Every instruction line carries an address: the labels cover the
        # code, which is as long as the dis header says.
        size = int(re.match(r"tier-1 code of .*, (\d+) bytes", text).group(1))
        listed = sum(len(m.group(1).split()) for m in re.finditer(r"^    0x[0-9a-f]+  ((?:[0-9a-f]{2} ?)+)", text, re.M))
        assert listed == size
        if platform.machine() != "x86_64":
            return  # the aarch64 stencils have no cold parts
        cold = text[text.index("cold paths:"):]
        headers = re.findall(r"^  (\s*\d+ \S.*|\s+shared exit)    \[cold part of (\S+)\]$", cold, re.M)
        assert headers, text
        # Each cold part's header is followed by its code; the first line of
        # the cold section is a header, not code.
        first = [l for l in cold.splitlines()[1:] if l.strip()][0]
        assert "[cold part of" in first, text
        # The attribute load's guard fails to a cold part of its own.
        assert any("LOAD_ATTR" in h and s.startswith("LOAD_ATTR") for h, s in headers), headers
    finally:
        ember.unpin(get_x)


def test_stores_an_unpacking_does_are_placed_with_the_rare_paths(ember_on):
    # UNPACK_SEQUENCE_*__STORES (here __LOAD_STORES, the sequence's load
    # folded in) stores the items itself and goes on with the code after
    # the stores' own, which runs only after a sequence its fast path does
    # not take (the generic unpacking jumps there): that code is placed
    # with the rare paths, not between the common paths, where a function
    # of many unpackings (unpack_sequence) would run through it.
    def swap(seq):
        a, b, c, d = seq
        return d, c, b, a

    ember.pin(swap, 1)
    try:
        assert [swap((1, 2, 3, 4)) for _ in range(3)] == [(4, 3, 2, 1)] * 3
        assert swap([5, 6, 7, 8]) == (8, 7, 6, 5)
        assert swap("wxyz") == ("z", "y", "x", "w")  # the generic way, then the stores' code
        with pytest.raises(ValueError):
            swap((1, 2, 3))
        assert ember.is_compiled(swap)
        out = io.StringIO()
        ember.dis(swap, file=out)
        text = out.getvalue()
        assert re.search(r"__(LOAD_)?STORES\]", text), text
        stores = [m.start() for m in re.finditer(r"\[stencil STORE_FAST_STORE_FAST\]", text)]
        assert len(stores) == 2, text
        assert all(text.index("cold paths:") < at for at in stores), text
    finally:
        ember.unpin(swap)


def test_perf_map_matches_compiled_code(tmp_path):
    # Every compilation appends one line; the stats list the code now live.
    # The child turns Ember and the garbage collector off before it looks,
    # so that nothing compiles or is freed after the snapshot, and leaves
    # through os._exit (no exit handlers).
    source = """
        import ember, gc, json, os, sys
        def work(n):
            t = 0
            for i in range(n):
                t += i
            return t
        class K:
            def method(self, x):
                return [x * i for i in range(3)]
        work(10), K().method(2)
        # No code object may die (and free its code) after the snapshot.
        gc.collect()
        gc.disable()
        ember.disable()
        s = ember.stats()
        entries = [f for f in s["functions"] if "tier1" in f]
        code = {c.co_qualname: ember._ember._tier1_code(c) for c in (work.__code__, K.method.__code__)}
        # The kernel hands /proc/self/maps out in chunks; were this process to
        # map or unmap memory between two, lines could be skipped. So: into a
        # buffer made beforehand, twice, until two readings agree. (Not
        # another process's view: under qemu-user only /proc/self/maps shows
        # the guest's permissions.)
        def read_maps(buf):
            fd = os.open("/proc/self/maps", os.O_RDONLY)
            view, n = memoryview(buf), 0
            while (got := os.readinto(fd, view[n:])) > 0:
                n += got
            os.close(fd)
            return bytes(view[:n])
        buf = bytearray(16 << 20)
        for _ in range(5):
            text = read_maps(buf)
            if read_maps(buf) == text:
                break
        else:
            raise AssertionError("/proc/self/maps kept changing")
        text = text.decode()
        maps = []
        for line in text.splitlines():
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            maps.append((lo, hi, line.split()[1]))
        print(json.dumps({
            "compiled": s["global"]["tier1"]["compiled"],
            "entries": [[f["qualname"], f["tier1"]["address"], f["tier1"]["code_bytes"],
                         f["tier1"]["total_bytes"]] for f in entries],
            "code": {q: [c[1], len(c[0])] for q, c in code.items() if c},
            "maps": maps,
            "pid": os.getpid(),
        }))
        sys.stdout.flush()
        os._exit(0)
    """
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0", "EMBER_PERF_MAP": "1"}, tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    path = f"/tmp/perf-{out['pid']}.map"
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    finally:
        os.unlink(path)
    # perf's format: START SIZE NAME, hexadecimal without 0x.
    parsed = []
    for line in lines:
        m = re.fullmatch(r"([0-9a-f]+) ([0-9a-f]+) py::(.+):ember-t1", line)
        assert m, line
        parsed.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    # One line per compilation (recompilations included), none missing.
    assert len(parsed) == out["compiled"] > 0
    entries = out["entries"]
    assert {"work", "K.method"} <= {q for q, *_ in entries}
    # The last line for each address is the code there now.
    latest = {addr: (size, name) for addr, size, name in parsed}
    for qualname, address, code_bytes, total_bytes in entries:
        assert latest[address] == (code_bytes, qualname)
        assert 0 < code_bytes <= total_bytes
        # The range perf attributes to the function is executable memory.
        assert any(lo <= address and address + code_bytes <= hi and "x" in perms
                   for lo, hi, perms in out["maps"]), (qualname, hex(address))
    # And it is exactly the machine code tier 1 reports for the code object.
    assert set(out["code"]) == {"work", "K.method"}
    for qualname, (address, size) in out["code"].items():
        assert latest[address] == (size, qualname)
    # Live code objects' ranges do not overlap.
    ranges = sorted((a, a + n) for _, a, n, _ in entries)
    assert all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:]))


def test_back_edges_match_the_interpreters_jumps(tmp_path):
    # CPython is the reference: sys.monitoring's JUMP events to an earlier
    # offset are the back-edges the interpreter takes. Tier-1 code must count
    # the same for a call it runs from start to end (no hand-off).
    source = """
        import sys
        def nested(n):
            c = 0
            for i in range(n):
                j = 0
                while j < i:
                    j += 1
                    if j == 5:
                        continue
                    c += 1
            return c
        def rec():
            return next(f for f in ember.stats()["functions"] if f["qualname"] == "nested")
        def main(mode):
            # In a function: a new global name would change the globals'
            # keys version that nested's LOAD_GLOBAL_BUILTIN checks.
            for _ in range(4):
                nested(30)
            if mode == "ember":
                ember.pin(nested, 1)
                nested(3)
                before = rec()
                r = nested(150)
                after = rec()
                assert after["tier"] == 1, after
                print(r, after["back_edges"] - before["back_edges"], after["handoffs"] - before["handoffs"])
            else:
                mon = sys.monitoring
                back = 0
                def jump(code, src, dst):
                    nonlocal back
                    if code is nested.__code__ and dst <= src:
                        back += 1
                mon.use_tool_id(mon.PROFILER_ID, "count")
                mon.register_callback(mon.PROFILER_ID, mon.events.JUMP, jump)
                mon.set_local_events(mon.PROFILER_ID, nested.__code__, mon.events.JUMP)
                r = nested(150)
                mon.set_local_events(mon.PROFILER_ID, nested.__code__, 0)
                print(r, back, 0)
        if sys.argv[1] == "ember":
            import ember
        main(sys.argv[1])
    """
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(source))
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER")}
    results = {}
    for mode, extra in [("stock", {}), ("ember", {"EMBER": "1", "EMBER_MAX_TIER": "0"})]:
        p = subprocess.run([sys.executable, str(script), mode], env={**env, **extra}, capture_output=True,
                           text=True, cwd=tmp_path, timeout=120)
        assert p.returncode == 0 and p.stderr == "", p.stderr
        results[mode] = tuple(map(int, p.stdout.split()))
    result, back_edges, handoffs = results["ember"]
    assert handoffs == 0
    assert results["stock"] == (result, back_edges, 0)
    assert back_edges > 150 * 70  # outer iterations plus the inner ones


def test_back_edges_unknown_in_the_interpreter(ember_on):
    def spin(n):
        for _ in range(n):
            pass

    ember.pin(spin, 0)
    spin(100)
    f = next(f for f in ember.stats()["functions"] if f["qualname"] == spin.__qualname__)
    assert f["back_edges"] is None and f["compiles"] == {"1": 0} and f["tier"] == 0
    ember.unpin(spin)


def test_lifetime_counts_include_freed_code_objects(tmp_path):
    # The compiled share of everything that ran must not depend on what is
    # still alive: a compiled code object that dies stays counted as
    # compiled, and one that stayed in the interpreter keeps its reason.
    source = """
        import ember, gc, json, sys

        def make(name):
            ns = {}
            exec(compile(f"def {name}(x):\\n    return x + 1\\n", f"<{name}>", "exec"), ns)
            return ns[name]

        before = ember.stats()["global"]
        hot = make("hot")
        hot(1)
        assert ember.is_compiled(hot)
        sys.settrace(lambda *a: None)
        traced = make("traced")
        traced(1)
        sys.settrace(None)
        assert not ember.is_compiled(traced)
        reason = next(f["interpreter_reason"] for f in ember.stats()["functions"] if f["qualname"] == "traced")
        del hot, traced
        gc.collect()
        after = ember.stats()["global"]
        print(json.dumps({"before": before, "after": after, "reason": reason}))
    """
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0"}, tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    before, after, reason = out["before"], out["after"], out["reason"]
    # Refused as instrumented, or deferred until the interpreter has run it.
    assert reason in ("instrumented", "instrumentation changed since it last ran (compiled at a later call)")
    delta = lambda key, sub: after[key].get(sub, 0) - before[key].get(sub, 0)
    assert after["code_objects_freed"] - before["code_objects_freed"] >= 2
    assert delta("code_objects_freed_by_tier", "1") >= 1
    assert delta("code_objects_freed_by_tier", "0") >= 1
    assert delta("code_objects_ever_compiled", "1") >= 1
    assert delta("interpreter_reasons", reason) >= 1
    # Every code object that ran is counted once: compiled, or in the
    # interpreter with or without a reason.
    assert after["code_objects_ever_compiled"]["1"] + sum(after["interpreter_reasons"].values()) \
        <= after["code_objects_seen"]


@pytest.mark.parametrize("backing", ["memfd", "anon"])
def test_both_code_memory_backings(tmp_path, backing):
    # Code objects are made and freed by the hundred, so blocks are reused;
    # the output is checked against the interpreter's.
    source = """
        import gc
        total = 0
        for n in range(300):
            ns = {}
            exec(f"def f(x):\\n    try:\\n        return [i * {n} for i in range(x)][-1] // (x - 3)\\n"
                 f"    except ZeroDivisionError:\\n        return -{n}\\n", ns)
            total += sum(ns["f"](x) for x in range(1, 6))
            del ns
            gc.collect()
        def gen(k):
            for i in range(k):
                yield i * i
        print(total, sum(gen(50)))
    """
    stats = """
        import ember
        t1 = ember.stats()["global"]["tier1"]
        print(t1["compiled"] > 300, t1["mapped_bytes"] < 64 << 20)
    """
    stock = run(source, {}, tmp_path)
    assert stock.returncode == 0, stock.stderr
    stock_out = stock.stdout.strip()
    extra = {"EMBER": "1", "EMBER_MAX_TIER": "1", "EMBER_TIER1_THRESHOLD": "0"}
    if backing == "anon":
        extra["EMBER_DEV_JIT_MEMORY"] = "anon"
    p = run(textwrap.dedent(source) + textwrap.dedent(stats), extra, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [stock_out, "True True"], p.stderr


def test_code_memory_under_a_file_size_limit(tmp_path):
    # RLIMIT_FSIZE limits writes to a memfd as to any file (CPython ignores
    # SIGXFSZ, so the write fails with EFBIG): compiled code must still be
    # placed, in anonymous pages, and nothing refused for memory.
    source = """
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
        fs = []
        for n in range(50):
            ns = {}
            exec(f"def f(x):\\n    return [i + {n} for i in range(x)]\\n", ns)
            fs.append(ns["f"])
        print(sum(sum(f(20)) for f in fs))
        import ember
        g = ember.stats()["global"]
        print(all(ember.is_compiled(f) for f in fs), g["tier1"].get("refused", {}), g["interpreter_reasons"])
    """
    stock = run(source.split("        import ember")[0], {}, tmp_path)
    assert stock.returncode == 0, stock.stderr
    extra = {"EMBER": "1", "EMBER_MAX_TIER": "1", "EMBER_TIER1_THRESHOLD": "0"}
    p = run(source, extra, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [stock.stdout.strip(), "True {} {}"], p.stderr


def test_calls_between_compiled_functions_count_as_the_evaluator_does(tmp_path):
    # Compiled code enters a compiled callee (or resumes a compiled
    # generator) without going through the evaluator; it must count every
    # call and resumption as the evaluator would, and stop entering the
    # compiled code while the callee is pinned to the interpreter.
    source = """
        import ember
        def f(x):
            return x + 1
        def gen(n):
            for i in range(n):
                yield i
        def g(n):
            s = 0
            for i in range(n):
                s = f(s)
            for x in gen(n):
                s += x
            return s
        out = [g(1000) for _ in range(3)]
        ember.pin(f, 0)
        out.append(g(1000))
        ember.unpin(f)
        out.append(g(1000))
        by_name = {e["qualname"]: e for e in ember.stats()["functions"]}
        print(out)
        print(by_name["f"]["calls"], by_name["gen"]["calls"], by_name["gen"]["resumes"],
              by_name["f"]["tier"], by_name["g"]["tier"], by_name["gen"]["tier"])
    """
    p = run(source, {"EMBER": "1", "EMBER_MAX_TIER": "1", "EMBER_TIER1_THRESHOLD": "0"}, tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [str([1000 + 499500] * 5), "5000 5 5005 1 1 1"], p.stderr


def test_legacy_subinterpreter_leaves_ember_alone(tmp_path):
    # Ember acts on the main interpreter only. A subinterpreter made the
    # legacy way (Py_NewInterpreter: mod_wsgi, test.support.run_in_subinterp)
    # runs site and so Ember's .pth; it can import Ember's single-phase
    # module, and then had Ember start there, whose exit-time stats writer
    # read records of the main interpreter's code objects and crashed.
    pytest.importorskip("_testcapi")
    flag = tmp_path / "sub.txt"
    source = f"""
        import _testcapi
        code = "import sys\\nopen({str(flag)!r}, 'w').write(str('ember' in sys.modules or 'ember._ember' in sys.modules))"
        print(_testcapi.run_in_subinterp(code))
        def loop(n):
            return sum(i for i in range(n))
        print(loop(10))
    """
    p = run(source, {"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0", "EMBER_STATS": str(tmp_path / "stats.json")},
            tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "0\n45\n", p.stdout
    assert flag.read_text() == "False"
    # Asked for there, it refuses.
    source = f"""
        import _testcapi
        code = "import ember\\ntry:\\n    ember.enable()\\nexcept RuntimeError as e:\\n    open({str(flag)!r}, 'w').write(str(e))"
        print(_testcapi.run_in_subinterp(code))
    """
    p = run(source, {}, tmp_path)
    assert p.returncode == 0 and p.stdout == "0\n", (p.stdout, p.stderr)
    assert flag.read_text() == "Ember runs in the main interpreter only, not in a subinterpreter"
