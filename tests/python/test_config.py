"""Configuration from the environment (EMBER, EMBER_STATS, bad values) and
the `python -m ember` command line, each in a fresh subprocess."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import difftest

# Prints whether the autoload loaded Ember's extension and enabled Ember
# before the script ran, then does some work so that the hook has something
# to count.
PROBE = textwrap.dedent("""
    import sys
    loaded = "ember._ember" in sys.modules
    import ember

    def square(x):
        return x * x

    print(loaded, ember.is_enabled(), sum(square(i) for i in range(25)))
""")

ARGV = textwrap.dedent("""
    import sys

    def main():
        print(__name__, sys.argv)

    main()
""")


def python(*args, env=None, cwd, input=None):
    """Run the environment's python; EMBER* variables come only from `env`."""
    return subprocess.run([sys.executable, *args], env=difftest.clean_environ(env),
                          cwd=cwd, capture_output=True, text=True, timeout=60, input=input)


def outcome(p):
    return p.stdout, p.stderr, p.returncode


@pytest.fixture
def scripts(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "argv.py").write_text(ARGV)
    (tmp_path / "argvmod.py").write_text(ARGV)
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(3)\n")
    return tmp_path


def load_stats(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    assert data["schema"] == "ember-stats" and data["enabled"] is True
    return data


def calls_of(stats, qualname, filename):
    return sum(f["calls"] for f in stats["functions"]
               if f["qualname"] == qualname and f["filename"] == filename)


# --- EMBER / EMBER_STATS ----------------------------------------------------

def test_ember_1_enables_at_startup_without_code_changes(scripts):
    p = python("probe.py", env={"EMBER": "1"}, cwd=scripts)
    assert (p.stdout, p.stderr, p.returncode) == ("True True 4900\n", "", 0)


def test_startup_imports_only_the_extension(scripts):
    # Every EMBER=1 process pays for what the autoload imports: the extension
    # (configuration included), not the package, which a program importing
    # it gets with the extension already loaded, nor the per-function calls
    # (ember/_api.py), which come with their first use, under every name the
    # package exports.
    (scripts / "mods.py").write_text(textwrap.dedent("""
        import sys
        print(sorted(m for m in sys.modules if m.startswith("ember")))
        extension = sys.modules["ember._ember"]
        import ember
        from ember import *
        print(ember._ember is extension, ember.is_enabled(),
              all(callable(globals()[name]) for name in ember.__all__),
              set(ember.__all__) <= set(dir(ember)), "ember._api" in sys.modules)
    """))
    p = python("mods.py", env={"EMBER": "1"}, cwd=scripts)
    assert (p.stdout, p.stderr, p.returncode) == (
        "['ember._ember', 'ember_autoload']\nTrue True True True True\n", "", 0)


def test_ember_1_without_ember_importable_says_so_and_runs_on(scripts):
    # The autoload (installed beside ember.pth) with no `ember` on the path:
    # one line, and the program runs as without Ember.
    env = {"EMBER": "1", "PYTHONPATH": ""}
    p = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('ember') is None)"],
                       env=difftest.clean_environ({"PYTHONPATH": ""}), capture_output=True, text=True, timeout=60)
    if p.stdout != "True\n":
        pytest.skip("ember is importable without PYTHONPATH here (installed into the environment)")
    p = python("argv.py", env=env, cwd=scripts)
    assert outcome(p) == ("__main__ ['argv.py']\n",
                          "ember: EMBER is set but Ember cannot be imported (No module named 'ember'); "
                          "Ember stays off\n", 0)


@pytest.mark.parametrize("env, loaded", [({"EMBER": "0"}, "True"), ({}, "False")])
def test_ember_off(scripts, env, loaded):
    p = python("probe.py", env=env, cwd=scripts)
    assert (p.stdout, p.stderr, p.returncode) == (f"{loaded} False 4900\n", "", 0)


BAD = [
    ("EMBER", "2"),
    ("EMBER", "yes"),
    ("EMBER", ""),
    ("EMBER_STATS", ""),
    ("EMBER_STATS", "/nonexistent/dir/x.json"),
    ("EMBER_FOO", "1"),
    # Digits, but more than the setting holds.
    ("EMBER_TIER1_THRESHOLD", "99999999999999999999999"),
    ("EMBER_CODE_LIMIT_MB", "18446744073709551615"),
]


@pytest.mark.parametrize("name, value", BAD)
def test_bad_variable_one_line_and_ember_stays_off(scripts, name, value):
    env = {"EMBER": "1", name: value}
    p = python("probe.py", env=env, cwd=scripts)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"ember: {name}") and lines[0].endswith("Ember stays off")
    assert (p.stdout, p.returncode) == ("True False 4900\n", 0)


def test_ember_stats_written_at_exit_with_pid(scripts):
    template = os.path.join(difftest.stats_dir(), "config-{pid}.json")
    script = PROBE + "import os\nprint(os.getpid())\n"
    (scripts / "pid.py").write_text(script)
    p = python("pid.py", env={"EMBER": "1", "EMBER_STATS": template}, cwd=scripts)
    assert p.returncode == 0 and p.stderr == ""
    pid = p.stdout.split()[-1]
    path = template.replace("{pid}", pid)
    stats = load_stats(path)
    assert calls_of(stats, "square", str(scripts / "pid.py")) == 25
    assert not os.path.exists(template)


def test_ember_stats_leaves_the_program_s_modules_alone(scripts, tmp_path):
    # Writing the file must not import anything into the observed program
    # (json once was: and through it re, whose compiler tier 1 then compiled
    # at every start-up).
    probe = "import sys\nprint(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))\n"
    (scripts / "mods.py").write_text(probe)
    stock = python("mods.py", env={}, cwd=scripts)
    path = str(tmp_path / "s.json")
    ember_run = python("mods.py", env={"EMBER": "1", "EMBER_STATS": path}, cwd=scripts)
    assert (ember_run.stdout, ember_run.stderr, ember_run.returncode) == (stock.stdout, "", 0)
    assert stock.stdout == "[]\n"
    assert load_stats(path)["functions"]


def test_stats_file_is_what_stats_returns(scripts, tmp_path):
    # The native writer against Python's json module, on a real document with
    # non-ASCII and escaped names.
    script = textwrap.dedent(r"""
        import json, sys, ember
        def fé(): return 1
        for _ in range(3): fé()
        def h(): return 2
        h.__code__ = h.__code__.replace(co_qualname='q"t\\ab\t')
        h()
        ember.write_stats(sys.argv[1])
        with open(sys.argv[1], encoding="utf-8") as fh:
            written = json.load(fh)
        live = ember.stats()
        for doc in (written, live):
            doc["functions"] = {x["qualname"]: x["calls"] for x in doc["functions"] if x["filename"] == __file__}
            doc.pop("global")
        assert written == json.loads(json.dumps(live)), (written, live)
        print(sorted(written["functions"].items()))
    """)
    (scripts / "same.py").write_text(script)
    p = python("same.py", str(tmp_path / "w.json"), env={"EMBER": "1"}, cwd=scripts)
    assert (p.stderr, p.returncode) == ("", 0)
    assert p.stdout == "[('<module>', 1), ('f\u00e9', 3), ('q\"t\\\\ab\\t', 1)]\n"


# CPython's test_threading.test_join_daemon_thread_in_finalization: the
# cycle's __del__ must run only in the collection after daemon threads are
# stopped. A collection set off by Ember's exit-time stats ran it earlier,
# where join() waits forever.
DAEMON_JOIN_AT_FINALIZATION = textwrap.dedent("""
    import threading
    def loop():
        while True:
            pass
    class Cycle:
        def __init__(self):
            self.self_ref = self
            self.thr = threading.Thread(target=loop, daemon=True)
            self.thr.start()
        def __del__(self):
            assert self.thr.is_alive()
            try:
                self.thr.join(timeout=None)
            except PythonFinalizationError:
                assert self.thr.is_alive()
                print('got the correct exception!')
    Cycle()
""")


@pytest.mark.parametrize("how", ["EMBER_STATS", "--stats"])
def test_exit_time_stats_run_no_finaliser_early(scripts, tmp_path, how):
    (scripts / "cycle.py").write_text(DAEMON_JOIN_AT_FINALIZATION)
    if how == "EMBER_STATS":
        p = python("cycle.py", env={"EMBER": "1", "EMBER_STATS": str(tmp_path / "s.json")}, cwd=scripts)
        assert p.stderr == ""
        assert load_stats(tmp_path / "s.json")["functions"]
    else:
        p = python("-m", "ember", "--stats", "cycle.py", env={}, cwd=scripts)
        assert "ember: " in p.stderr
    assert (p.stdout, p.returncode) == ("got the correct exception!\n", 0)


def test_unwritable_stats_file_reported_at_exit(scripts):
    (scripts / "gone").mkdir()
    script = PROBE + "import os\nos.rmdir('gone')\n"
    (scripts / "rm.py").write_text(script)
    p = python("rm.py", env={"EMBER": "1", "EMBER_STATS": "gone/s.json"}, cwd=scripts)
    assert p.returncode == 0 and p.stdout == "True True 4900\n"
    assert p.stderr.startswith("ember: could not write EMBER_STATS file")


def test_stats_pid_file_per_forked_process(scripts):
    (scripts / "fork.py").write_text(textwrap.dedent("""
        import os, sys

        def child_work():
            return 1

        pid = os.fork()
        if pid == 0:
            child_work()
            sys.exit(0)
        os.waitpid(pid, 0)
        print(os.getpid(), pid)
    """))
    template = os.path.join(difftest.stats_dir(), "fork-{pid}.json")
    p = python("fork.py", env={"EMBER": "1", "EMBER_STATS": template}, cwd=scripts)
    assert p.returncode == 0 and p.stderr == ""
    parent, child = p.stdout.split()
    child_stats = load_stats(template.replace("{pid}", child))
    assert calls_of(child_stats, "child_work", str(scripts / "fork.py")) == 1
    load_stats(template.replace("{pid}", parent))


# --- python -m ember ---------------------------------------------------------

def test_script_gets_argv_and_main_name(scripts):
    args = ["argv.py", "a", "-x", "--stats", "-m", "mod"]
    stock = python(*args, cwd=scripts)
    p = python("-m", "ember", *args, cwd=scripts)
    assert stock.stdout == "__main__ ['argv.py', 'a', '-x', '--stats', '-m', 'mod']\n"
    assert (p.stdout, p.stderr, p.returncode) == (stock.stdout, "", 0)


def test_module_form(scripts):
    stock = python("-m", "argvmod", cwd=scripts)
    p = python("-m", "ember", "-m", "argvmod", cwd=scripts)
    assert stock.stdout == f"__main__ [{str(scripts / 'argvmod.py')!r}]\n"
    assert (p.stdout, p.stderr, p.returncode) == (stock.stdout, "", 0)


def test_code_form(scripts):
    code = "import sys, ember; print(__name__, sys.argv, ember.is_enabled())"
    p = python("-m", "ember", "-c", code, cwd=scripts)
    assert (p.stdout, p.stderr, p.returncode) == ("__main__ ['-c'] True\n", "", 0)


@pytest.mark.parametrize("form", [["-c", "import sys; print(sys.argv[1:])"], ["-m", "argvmod"]])
def test_arguments_after_code_or_module(scripts, form):
    for args in (["a", "b"], ["-x"], ["--stats"]):
        p = python("-m", "ember", *form, *args, cwd=scripts)
        assert p.returncode == 0 and p.stderr == ""
        assert str(args)[1:] in p.stdout
        assert outcome(p) == outcome(python(*form, *args, cwd=scripts))


@pytest.mark.parametrize("form", [["exits.py"], ["-m", "exits"], ["-c", "import sys; sys.exit(3)"]],
                         ids=["script", "module", "code"])
def test_exit_code_propagates(scripts, form):
    p = python("-m", "ember", *form, cwd=scripts)
    assert (p.stdout, p.stderr, p.returncode) == ("", "", 3)


def test_uncaught_exception_exit_code(scripts):
    p = python("-m", "ember", "-c", "raise KeyError('boom')", cwd=scripts)
    assert p.returncode == 1 and p.stderr.rstrip().endswith("KeyError: 'boom'")


def test_traceback_same_as_plain_python(scripts):
    (scripts / "fail.py").write_text("def f():\n    raise ValueError('x')\nf()\n")
    script = str(scripts / "fail.py")  # absolute: __file__ differs otherwise (see below)
    stock = python(script, cwd=scripts)
    p = python("-m", "ember", script, cwd=scripts)
    assert stock.returncode == 1 and "ValueError: x" in stock.stderr
    assert (p.stderr, p.returncode) == (stock.stderr, 1)


def test_file_is_absolute_like_plain_python(scripts):
    (scripts / "where.py").write_text("print(__file__)\n")
    stock = python("where.py", cwd=scripts)
    p = python("-m", "ember", "where.py", cwd=scripts)
    assert stock.stdout == f"{scripts / 'where.py'}\n"
    assert p.stdout == stock.stdout


def test_stats_summary_on_stderr(scripts):
    p = python("-m", "ember", "--stats", "probe.py", cwd=scripts)
    assert p.returncode == 0 and p.stdout == "True True 4900\n"
    lines = p.stderr.splitlines()
    assert lines and all(line.startswith("ember: ") for line in lines)
    assert "frames" in lines[0] and "code objects seen" in lines[0]
    square = [line for line in lines if " square (probe.py:" in line]
    # Columns: calls, resumes, back-edges, hand-offs, tier. Tier 1 is
    # opt-in: by default square stays in the interpreter, where Ember does
    # not see back-edges ("-").
    assert len(square) == 1 and square[0].split()[1:6] == ["25", "0", "-", "0", "0"]


def test_stats_summary_is_the_readers(scripts):
    # python -m ember --stats and python -m ember.report format alike.
    path = difftest.new_stats_path("summary-vs-reader")
    p = python("-m", "ember", "--stats", "--stats-json", path, "probe.py", cwd=scripts)
    assert p.returncode == 0
    r = python("-m", "ember.report", path, "--top", "500", cwd=scripts)
    assert r.returncode == 0 and r.stderr == ""
    at_exit = [line.removeprefix("ember: ") for line in p.stderr.splitlines()]
    read = r.stdout.splitlines()
    header = next(line for line in read if line.split()[:2] == ["calls", "resumes"])
    assert header in at_exit
    # Writing the file at exit runs code after the summary: rows of
    # functions it did not call must be identical.
    start = at_exit.index(header) + 1
    read_rows = {row.split("  ")[-1]: row for row in read[read.index(header) + 1:]}
    same = [row for row in at_exit[start:] if read_rows.get(row.split("  ")[-1]) == row]
    assert len(same) >= 5, (at_exit, read)


LOOPS = textwrap.dedent("""
    def few(n):
        for _ in range(n):
            pass

    def many(n):
        t = 0
        for i in range(n):
            t += i
        return t

    def none(n):
        return n

    for k in range(20):
        few(2), many(300), none(k)
""")


def test_stats_reader_sorts_by_back_edges(tmp_path):
    (tmp_path / "loops.py").write_text(LOOPS)
    path = difftest.new_stats_path("reader-back-edges")
    p = python("loops.py", env={"EMBER": "1", "EMBER_TIER1_THRESHOLD": "0", "EMBER_STATS": path}, cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == ""
    doc = load_stats(path)
    ours = {f["qualname"]: f for f in doc["functions"] if f["filename"].endswith("loops.py")}
    assert ours["many"]["back_edges"] > ours["few"]["back_edges"] >= 0 and ours["none"]["back_edges"] == 0
    r = python("-m", "ember.report", path, "--top", "3", "--sort", "back_edges", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    rows = lines[lines.index(next(l for l in lines if l.split()[:2] == ["calls", "resumes"])) + 1:]
    assert len(rows) == 3
    # Most back-edges first, with the counts of the file.
    expected = sorted((f for f in doc["functions"] if f["back_edges"] is not None),
                      key=lambda f: -f["back_edges"])[:3]
    assert [int(row.split()[2]) for row in rows] == [f["back_edges"] for f in expected]
    assert " many (loops.py:" in rows[0]
    assert "back-edges taken" in r.stdout
    by_time = python("-m", "ember.report", path, "--top", "5", "--sort", "compile_time", cwd=tmp_path)
    assert by_time.returncode == 0
    lines = by_time.stdout.splitlines()
    rows = lines[lines.index(next(l for l in lines if l.split()[:2] == ["calls", "resumes"])) + 1:]
    times = [float(row.split()[6].removesuffix("us")) for row in rows]
    assert len(times) == 5 and times == sorted(times, reverse=True)


def test_stats_json_option(scripts):
    path = difftest.new_stats_path("stats-json-option")
    p = python("-m", "ember", "--stats-json", path, str(scripts / "probe.py"), cwd=scripts)
    assert (p.stdout, p.stderr, p.returncode) == ("True True 4900\n", "", 0)
    assert calls_of(load_stats(path), "square", str(scripts / "probe.py")) == 25


def test_stats_reader_prints_top_functions(scripts, tmp_path):
    path = difftest.new_stats_path("stats-reader")
    p = python("-m", "ember", "--stats-json", path, str(scripts / "probe.py"), cwd=scripts)
    assert p.returncode == 0
    r = python("-m", "ember.report", path, "--top", "500", "--sort", "calls", cwd=scripts)
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert "code objects seen" in lines[0]
    rows = lines[lines.index(next(l for l in lines if l.split()[:2] == ["calls", "resumes"])) + 1:]
    assert 3 <= len(rows) <= 500
    # Most calls first; square was called 25 times.
    calls = [int(row.split()[0]) for row in rows]
    assert calls == sorted(calls, reverse=True)
    assert any(" square (probe.py:" in row and row.split()[0] == "25" for row in rows)
    top2 = python("-m", "ember.report", path, "--top", "2", cwd=scripts).stdout.splitlines()
    assert top2[-2:] == rows[:2]

    (tmp_path / "other.json").write_text('{"schema": "something-else"}')
    bad = python("-m", "ember.report", str(tmp_path / "other.json"), cwd=scripts)
    assert bad.returncode == 2 and "not an Ember stats file" in bad.stderr
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["schema_version"] = 99
    (tmp_path / "future.json").write_text(json.dumps(data))
    future = python("-m", "ember.report", str(tmp_path / "future.json"), cwd=scripts)
    assert future.returncode == 2 and "schema version 99" in future.stderr


def test_version(scripts):
    import ember

    p = python("-m", "ember", "--version", cwd=scripts)
    assert (p.stdout, p.returncode) == (f"ember {ember.__version__}\n", 0)


@pytest.mark.parametrize("args", [
    [],
    ["--stats"],
    ["--bogus", "probe.py"],
    ["-x", "probe.py"],
    ["-c"],
    ["-m"],
    ["--stats", "-m"],
    ["--stats-json"],
    ["--stats-json", "/nonexistent/dir/x.json", "probe.py"],
], ids=["nothing", "options-only", "unknown-option", "unknown-short-option", "c-without-code",
        "m-without-module", "stats-then-m-without-module", "stats-json-without-path",
        "stats-json-bad-dir"])
def test_usage_errors(scripts, args):
    p = python("-m", "ember", *args, cwd=scripts)
    assert p.returncode == 2
    assert p.stderr.startswith("usage: python -m ember") and "error:" in p.stderr
    assert p.stdout == ""


@pytest.mark.parametrize("name, value", [("EMBER", "2"), ("EMBER_FOO", "1")])
def test_bad_variable_reported_once_under_python_m_ember(scripts, name, value):
    p = python("-m", "ember", "probe.py", env={"EMBER": "1", name: value}, cwd=scripts)
    assert p.returncode == 0 and p.stdout == "True False 4900\n"
    assert len(p.stderr.splitlines()) == 1, p.stderr


# --- python -m ember runs a program as python does ---------------------------
#
# Each program runs under plain python and under python -m ember, in the same
# form (script, -m, -c, standard input, directory): stdout, stderr and exit
# status must be identical.

TOP_LEVEL = {
    "main-module": """
        import builtins, sys, __main__
        g = globals()
        print(list(g))
        loader = __loader__ if isinstance(__loader__, type) else type(__loader__)
        print(__name__, loader.__name__, __spec__ is None, repr(__package__), __doc__)
        print(__builtins__ is builtins, __main__ is sys.modules["__main__"], __main__.__dict__ is g)
        print(g.get("__file__"), g.get("__cached__"), sys.argv, repr(sys.path[0]))
        import atexit
        atexit.register(lambda: print("at exit:", "__file__" in g, "__cached__" in g))
    """,
    "uncaught": """
        def f():
            raise ValueError("x")
        f()
    """,
    "keyboard-interrupt": """
        import atexit
        atexit.register(print, "at exit")
        def f():
            raise KeyboardInterrupt
        f()
    """,
    "sigint": """
        import signal
        signal.raise_signal(signal.SIGINT)
    """,
    "exit-message": """
        import sys
        sys.exit("bye")
    """,
    "excepthook": """
        import sys, traceback
        def hook(t, v, tb):
            names = [f.name for f in traceback.extract_tb(tb)]
            print("hook", t.__name__, names, tb is v.__traceback__, file=sys.stderr)
        sys.excepthook = hook
        def f():
            1 / 0
        f()
    """,
    "excepthook-raises": """
        import sys
        def hook(t, v, tb):
            raise TypeError("in hook")
        sys.excepthook = hook
        1 / 0
    """,
    "excepthook-exits": """
        import sys
        def hook(t, v, tb):
            sys.exit(5)
        sys.excepthook = hook
        1 / 0
    """,
    "excepthook-missing": """
        import sys
        del sys.excepthook
        1 / 0
    """,
    "last-exc-at-exit": """
        import atexit, sys, traceback
        def show():
            e = sys.last_exc
            print(type(e).__name__, e is sys.last_value, sys.last_type is type(e),
                  [f.name for f in traceback.extract_tb(sys.last_traceback)],
                  sys.last_traceback is e.__traceback__, file=sys.stderr)
        atexit.register(show)
        def g():
            raise OSError(2, "gone")
        g()
    """,
    "no-future-flags": """
        def f(x: int) -> None:
            pass
        print(f.__annotations__)
    """,
    "thread-exception": """
        import threading
        def f():
            raise ValueError("in thread")
        t = threading.Thread(target=f, name="worker")
        t.start()
        t.join()
        print("joined")
    """,
}


def program(tmp_path, form, source):
    """The arguments that run `source` in `form`, and its standard input."""
    source = textwrap.dedent(source)
    if form == "script":
        (tmp_path / "prog.py").write_text(source)
        return ["prog.py", "a", "-b"], None
    if form == "module":
        (tmp_path / "prog.py").write_text(source)
        return ["-m", "prog", "a", "-b"], None
    if form == "command":
        return ["-c", source, "a", "-b"], None
    if form == "stdin":
        return ["-", "a", "-b"], source
    assert form == "directory"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__main__.py").write_text(source)
    return ["app", "a", "-b"], None


def stock_and_ember(*args, cwd, input=None):
    """Outcomes of `python ARGS` and `python -m ember ARGS`, run side by side."""
    procs = [subprocess.Popen([sys.executable, *launcher, *args], env=difftest.clean_environ(),
                              cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for launcher in ([], ["-m", "ember"])]
    results = []
    for proc in procs:
        out, err = proc.communicate(input, timeout=60)
        results.append((out, err, proc.returncode))
    return results


# Every program in the three main forms; the first few also from standard
# input and as a directory's __main__.py.
MATRIX = [(name, form) for name in TOP_LEVEL for form in ("script", "module", "command")]
MATRIX += [(name, form) for name in ("main-module", "uncaught", "keyboard-interrupt")
           for form in ("stdin", "directory")]


@pytest.mark.parametrize("name, form", MATRIX, ids=[f"{n}-{f}" for n, f in MATRIX])
def test_program_runs_as_under_plain_python(tmp_path, name, form):
    args, stdin = program(tmp_path, form, TOP_LEVEL[name])
    stock, ember = stock_and_ember(*args, cwd=tmp_path, input=stdin)
    assert ember == stock


@pytest.mark.parametrize("form", ["script", "stdin", "directory"])
def test_syntax_error_as_under_plain_python(tmp_path, form):
    args, stdin = program(tmp_path, form, "x = 1\ndef f(:\n    pass\n")
    stock, ember = stock_and_ember(*args, cwd=tmp_path, input=stdin)
    assert stock[2] == 1 and "SyntaxError" in stock[1]
    assert ember == stock


@pytest.mark.parametrize("source", [
    "# -*- coding: latin-1 -*-\nprint('\xe9', ascii('\xe9'))\n".encode("latin-1"),
    "\ufeffprint('with a BOM')\n".encode("utf-8"),
    b"print(1)\r\nprint(2)\r\n",
], ids=["coding-declaration", "bom", "crlf"])
def test_script_source_decoded_as_by_python(tmp_path, source):
    (tmp_path / "enc.py").write_bytes(source)
    stock, ember = stock_and_ember("enc.py", cwd=tmp_path)
    assert stock[2] == 0
    assert ember == stock


def test_compiled_script_runs_as_under_plain_python(tmp_path):
    import py_compile

    (tmp_path / "src.py").write_text("print(__file__, type(__loader__).__name__)\n1 / 0\n")
    py_compile.compile(str(tmp_path / "src.py"), cfile=str(tmp_path / "comp.pyc"), doraise=True)
    stock, ember = stock_and_ember("comp.pyc", cwd=tmp_path)
    assert "SourcelessFileLoader" in stock[0] and stock[2] == 1
    assert ember == stock


@pytest.mark.parametrize("name", ["where.py", "./where.py", "sub/../where.py", "link/where.py",
                                  "absolute", "from-root", "missing.py"])
def test_file_and_path0_as_under_plain_python(tmp_path, name):
    (tmp_path / "where.py").write_text(
        "import sys\nprint(__file__, sys.argv, sys.path[0], __spec__, __package__)\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "where.py").symlink_to(tmp_path / "where.py")
    cwd = tmp_path
    if name == "absolute":
        name = str(tmp_path / "where.py")
    elif name == "from-root":
        cwd, name = "/", str(tmp_path / "where.py")[1:]
    stock, ember = stock_and_ember(name, cwd=cwd)
    assert ember == stock


@pytest.mark.parametrize("args", [
    ["-c", "import sys; print(sys.argv)", "-m", "argvmod"],
    ["-c", "import sys; print(sys.argv)", "--", "-c", "x"],
    ["-cimport sys; print(sys.argv)", "x"],
    ["-m", "argvmod", "-c", "x"],
    ["-margvmod", "--stats"],
    ["argv.py", "-m", "argvmod", "--version"],
    ["--", "argv.py", "-h"],
], ids=["c-then-m", "c-then-dashes", "c-attached", "m-then-c", "m-attached", "script-then-options",
        "dashes-then-script"])
def test_everything_after_the_program_is_the_programs(scripts, args):
    stock, ember = stock_and_ember(*args, cwd=scripts)
    assert stock[2] == 0
    assert ember == stock
    # Ember's options go before the program.
    p = python("-m", "ember", "--stats-json", difftest.new_stats_path("before"), *args, cwd=scripts)
    assert outcome(p) == stock


def test_code_is_dedented_as_by_python(scripts):
    code = "\n    import sys\n\n    if True:\n        print(sys.argv)\n  \n"
    stock, ember = stock_and_ember("-c", code, "x", cwd=scripts)
    assert stock[0] == "['-c', 'x']\n"
    assert ember == stock


def test_program_sees_no_ember_frames_in_tracebacks_under_ember(scripts):
    # The program runs with Ember on, and Ember's frames stay out of the traceback.
    code = ("import ember\ndef f():\n    raise LookupError(ember.is_enabled())\nf()\n")
    p = python("-m", "ember", "-c", code, cwd=scripts)
    assert p.returncode == 1 and p.stderr.rstrip().endswith("LookupError: True")
    assert "ember" not in p.stderr.replace("ember.is_enabled", "")
    assert "runpy" not in p.stderr
