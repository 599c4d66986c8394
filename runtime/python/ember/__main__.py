"""python -m ember [--stats] [--stats-json PATH] (script.py | -m module | -c code | -) [args...]

Runs a program with Ember on, as `python script.py` (`python -m module`,
`python -c code`, `python -`) would run it: the same sys.argv, sys.path[0],
__main__ module, tracebacks and exit status. Ember's own options come before
the program; everything after the program belongs to it.
"""

from __future__ import annotations

import os
import sys

import ember

PROG = "python -m ember"
USAGE = (f"usage: {PROG} [--stats] [--stats-json PATH] [--version] [-h]\n"
         f"       {' ' * len(PROG)} (script.py | -m MODULE | -c CODE | -) [args ...]\n")
HELP = USAGE + """
Run a Python program with the Ember JIT on, as python itself would run it.

options (before the program only; everything after it is the program's):
  --stats           print a summary of what Ember did when the program exits
  --stats-json PATH write ember.stats() as JSON to PATH at exit (as EMBER_STATS
                    does; {pid} in PATH becomes the process id)
  --version         print Ember's version and exit
  -h, --help        print this help and exit

the program (the first of):
  script.py         a script, a directory or a zip file with __main__.py
  -m MODULE         run a library module as a script
  -c CODE           run a program passed as a string
  -                 read the program from standard input
  args ...          arguments for the program, in sys.argv[1:]

Environment variables (EMBER_*) are documented in docs/usage.md.
"""

# Frames of this module are left out of the program's tracebacks.
_OWN_GLOBALS = globals()
_MISSING = object()


class _Options:
    def __init__(self):
        self.stats = False
        self.stats_json: str | None = None
        self.kind = ""  # "script", "module", "command" or "stdin"
        self.target = ""
        self.args: list[str] = []


def _usage_error(message: str):
    sys.stderr.write(f"{USAGE}{PROG}: error: {message}\n")
    raise SystemExit(2)


def parse_args(argv: list[str]) -> _Options:
    """Ember's options, then the program: parsed as python parses its own
    command line (-c and -m end the options; -cCODE and -mMODULE are accepted)."""
    opts = _Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg == "-" or not arg.startswith("-"):
            break
        if arg in ("-h", "--help"):
            sys.stdout.write(HELP)
            raise SystemExit(0)
        if arg == "--version":
            print(f"ember {ember.__version__}")
            raise SystemExit(0)
        if arg == "--stats":
            opts.stats = True
        elif arg == "--stats-json" or arg.startswith("--stats-json="):
            if arg == "--stats-json":
                if i + 1 == len(argv):
                    _usage_error("argument --stats-json: expected one argument")
                i += 1
                value = argv[i]
            else:
                value = arg.partition("=")[2]
            try:
                ember._path("--stats-json", value)
            except ember.ConfigError as e:
                _usage_error(str(e))
            opts.stats_json = value
        elif arg[:2] in ("-c", "-m"):
            flag = arg[:2]
            if len(arg) > 2:
                target = arg[2:]
            elif i + 1 < len(argv):
                i += 1
                target = argv[i]
            else:
                _usage_error(f"argument {flag}: expected one argument")
            opts.kind = "command" if flag == "-c" else "module"
            opts.target, opts.args = target, argv[i + 1:]
            return opts
        else:
            _usage_error(f"unrecognized option {arg!r} (Ember's options come before the "
                         "program; the program's own options after it)")
        i += 1
    if i == len(argv):
        _usage_error("nothing to run: give a script, -m MODULE, -c CODE or -")
    opts.kind = "stdin" if argv[i] == "-" else "script"
    opts.target, opts.args = argv[i], argv[i + 1:]
    return opts


def print_summary(out=None, top: int = 15) -> None:
    out = sys.stderr if out is None else out
    # As for the stats file (ember._write_stats_at_exit): no garbage
    # collection, and so no finaliser, runs because of the summary.
    gc_was_on = ember._ember._gc_pause()
    try:
        for line in report.format_summary(ember.stats(), top=top):
            print(f"ember: {line}", file=out)
    finally:
        if gc_was_on:
            ember._ember._gc_resume()


def _start_ember(opts: _Options) -> None:
    try:
        cfg = ember._from_environ()
    except ember.ConfigError as e:
        # With EMBER set, the ember.pth autoload has said so already: report() says it once.
        ember._report(e)
        return
    try:
        ember.enable()
    except RuntimeError as e:  # another frame evaluator
        ember._report(e)
        return
    if cfg.stats_path:
        ember._write_stats_at_exit(cfg.stats_path)
    if opts.stats_json:
        ember._write_stats_at_exit(opts.stats_json, "--stats-json")
    if opts.stats:
        import atexit
        # Imported now, not at exit: an import at exit runs code (and maybe
        # a collection) the program never ran at that point.
        global report
        from . import report
        atexit.register(print_summary)


# --- Running the program as python runs it (Modules/main.c, Python/pythonrun.c) ---

def _fresh_main():
    """A new __main__ module, as the interpreter makes it at start-up
    (python -m ember's own __main__ is this module)."""
    import builtins
    import types
    from importlib.machinery import BuiltinImporter

    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    main.__loader__ = BuiltinImporter
    sys.modules["__main__"] = main
    return main.__dict__


def _set_path0(entry: str, *, always: bool = False) -> None:
    """Put the program's entry in sys.path[0], where python -m ember put the
    current directory (nothing there under -P, unless `always`)."""
    if not sys.flags.safe_path:
        sys.path[0] = entry
    elif always:
        sys.path.insert(0, entry)


def _abspath(path: str) -> str:
    """_Py_abspath(): the script's path as python makes it (joined to the
    current directory, not normalised)."""
    if path in ("", "."):
        return os.getcwd()
    if os.path.isabs(path):
        return path
    return os.getcwd() + os.sep + path


def _main_importer_path(path: str) -> str | None:
    """PyImport_GetImporter(): `path` if a path hook takes it (a directory or
    zip file to run the __main__ of), caching the answer as the C code does."""
    cache = sys.path_importer_cache
    if path in cache:
        return None if cache[path] is None else path
    cache[path] = None
    for hook in sys.path_hooks:
        try:
            importer = hook(path)
        except ImportError:
            continue
        cache[path] = importer
        return path
    return None


def _dedent(text: str) -> str:
    """_PyUnicode_Dedent(), which python -c applies to its code: remove the
    spaces and tabs that every line with something else on it starts with; a
    line of nothing but spaces and tabs (but the last) becomes empty."""
    lines = text.split("\n")
    common = None
    for line in lines:
        rest = line.lstrip(" \t")
        if not rest:
            continue
        indent = line[:len(line) - len(rest)]
        if common is None:
            common = indent
        else:
            n = 0
            while n < min(len(common), len(indent)) and common[n] == indent[n]:
                n += 1
            common = common[:n]
        if not common:
            return text
    if not common:
        return text
    last = len(lines) - 1
    return "\n".join("" if i != last and not line.lstrip(" \t") else line[len(common):]
                     for i, line in enumerate(lines))


def _without_own_frames(tb):
    while tb is not None and tb.tb_frame.f_globals is _OWN_GLOBALS:
        tb = tb.tb_next
    return tb


def _write_stderr(text: str) -> None:
    if getattr(sys, "stderr", None) is not None:
        sys.stderr.write(text)


def _call_excepthook(hook, typ, value, tb) -> None:
    """How _PyErr_PrintEx() calls sys.excepthook."""
    if hook is _MISSING:
        _write_stderr("sys.excepthook is missing\n")
        sys.__excepthook__(typ, value, tb)
        return
    try:
        hook(typ, value, tb)
    except SystemExit:
        raise
    except BaseException as err:
        err.__traceback__ = _without_own_frames(err.__traceback__)
        _write_stderr("Error in sys.excepthook:\n")
        sys.__excepthook__(type(err), err, err.__traceback__)
        _write_stderr("\nOriginal exception was:\n")
        sys.__excepthook__(typ, value, tb)


def _reraise_to_interpreter(exc: BaseException, tb, after):
    """Let the program's uncaught exception leave python -m ember, so that the
    interpreter's top level handles it as for `python script.py`: sets
    sys.last_exc, calls sys.excepthook, exits with status 1, or for a
    KeyboardInterrupt re-raises SIGINT after finalisation. On its way out it
    gathers this module's and runpy's frames, so a one-shot sys.excepthook
    puts back the program's own traceback `tb` and the hook it replaced."""
    saved = getattr(sys, "excepthook", _MISSING)

    def excepthook(typ, value, value_tb):
        if saved is _MISSING:
            try:
                del sys.excepthook
            except AttributeError:
                pass
        else:
            sys.excepthook = saved
        if value is not exc:  # main()'s caller caught ours; this is another one
            _call_excepthook(saved, typ, value, value_tb)
            return
        value.__traceback__ = tb
        sys.last_traceback = tb
        try:
            _call_excepthook(saved, typ, value, tb)
        finally:
            after()

    sys.excepthook = excepthook
    exc.__traceback__ = tb
    raise exc


class _Program:
    """The program, set up in sys and in a fresh __main__ as python sets it up:
    either code to compile and run in `globals`, or a module for runpy."""

    def __init__(self, *, source=None, filename="", globals=None, module=None,
                 alter_argv=True, file_form=False, pyc=False):
        self.source = source  # bytes (a file: PEP 263 applies) or str (-c)
        self.filename = filename
        self.globals = globals
        self.module = module
        self.alter_argv = alter_argv
        # python runs a file (or standard input) through _PyRun_SimpleFileObject,
        # which flushes stderr and stdout when the code ends and removes
        # __file__ and __cached__ from __main__ once it is done with it.
        self.file_form = file_form
        self.pyc = pyc

    def compile(self):
        if self.pyc:
            return _code_of_pyc(self.source)
        # dont_inherit: none of this module's __future__ flags. From bytes, the
        # source is decoded per PEP 263 (BOM, coding declaration, else UTF-8).
        code = compile(self.source, self.filename, "exec", dont_inherit=True)
        if not self.file_form:  # -c: tracebacks show the lines of <string>, as under python -c
            import linecache

            register = getattr(linecache, "_register_code", None)
            if register is not None:
                register(code, self.source, self.filename)
        return code

    def flush(self):
        """flush_io(): stderr, then stdout, errors ignored."""
        if not self.file_form:
            return
        for name in ("stderr", "stdout"):
            f = getattr(sys, name, None)
            try:
                f.flush()
            except Exception:
                pass

    def done(self):
        if self.file_form:
            self.globals.pop("__file__", None)
            self.globals.pop("__cached__", None)


def _is_pyc(source: bytes) -> bool:
    """maybe_pyc_file(): the first two bytes of the magic number."""
    from importlib.util import MAGIC_NUMBER

    return source[:2] == MAGIC_NUMBER[:2]


def _code_of_pyc(data: bytes):
    """run_pyc_file()."""
    import marshal
    import types
    from importlib.util import MAGIC_NUMBER

    if data[:4] != MAGIC_NUMBER:
        raise RuntimeError("Bad magic number in .pyc file")
    try:
        code = marshal.loads(data[16:])
    except Exception:
        code = None
    if not isinstance(code, types.CodeType):
        raise RuntimeError("Bad code object in .pyc file")
    return code


def _file_program(filename: str, source: bytes, *, set_loader: bool) -> _Program:
    """_PyRun_SimpleFileObject(): a file's (or standard input's) code in a
    fresh __main__ with __file__ and __cached__, and for a file a loader."""
    d = _fresh_main()
    d["__file__"] = filename
    d["__cached__"] = None
    pyc = set_loader and (filename.endswith(".pyc") or _is_pyc(source))
    if set_loader:
        from importlib.machinery import SourceFileLoader, SourcelessFileLoader

        d["__loader__"] = (SourcelessFileLoader if pyc else SourceFileLoader)("__main__", filename)
    return _Program(source=source, filename=filename, globals=d, file_form=True, pyc=pyc)


def prepare_script(script: str, args: list[str]) -> _Program:
    """python script.py args..."""
    sys.argv = [script, *args]
    filename = _abspath(script)
    importer_path = _main_importer_path(filename)
    if importer_path is not None:  # a directory or zip file: runpy runs its __main__
        _set_path0(importer_path, always=True)
        sys.audit("cpython.run_module", "__main__")
        _fresh_main()
        return _Program(module="__main__", alter_argv=False)
    _set_path0(os.path.dirname(os.path.realpath(script)))
    sys.audit("cpython.run_file", filename)
    try:
        with open(filename, "rb") as f:
            source = f.read()
    except OSError as e:
        program = sys.orig_argv[0] if sys.orig_argv else sys.executable
        _write_stderr(f"{program}: can't open file {filename!r}: "
                      f"[Errno {e.errno}] {os.strerror(e.errno) if e.errno else e}\n")
        raise SystemExit(2)
    return _file_program(filename, source, set_loader=True)


def prepare_stdin(args: list[str]) -> _Program:
    """python - args... (standard input is read to its end, then run)."""
    sys.argv = ["-", *args]
    _set_path0("")
    sys.audit("cpython.run_stdin")
    return _file_program("<stdin>", sys.stdin.buffer.read(), set_loader=False)


def prepare_command(command: str, args: list[str]) -> _Program:
    """python -c CODE args..."""
    sys.argv = ["-c", *args]
    _set_path0("")
    sys.audit("cpython.run_command", command)
    return _Program(source=_dedent(command), filename="<string>", globals=_fresh_main())


def prepare_module(module: str, args: list[str]) -> _Program:
    """python -m MODULE args... (sys.path[0] stays the current directory;
    runpy sets sys.argv[0] to the module's file)."""
    sys.argv = ["-m", *args]
    sys.audit("cpython.run_module", module)
    _fresh_main()
    return _Program(module=module)


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    _start_ember(opts)
    if opts.kind == "script":
        program = prepare_script(opts.target, opts.args)
    elif opts.kind == "module":
        program = prepare_module(opts.target, opts.args)
    elif opts.kind == "command":
        program = prepare_command(opts.target, opts.args)
    else:
        program = prepare_stdin(opts.args)

    # The program runs right here, so that only four frames are below its
    # own (runpy's two that run ember, this module's and main's); they count
    # towards the recursion limit.
    try:
        if program.module is not None:
            import runpy

            runpy._run_module_as_main(program.module, alter_argv=program.alter_argv)
        else:
            exec(program.compile(), program.globals)
    except SystemExit:
        program.flush()
        raise
    except BaseException as exc:
        program.flush()
        _reraise_to_interpreter(exc, _without_own_frames(exc.__traceback__), program.done)
    program.flush()
    program.done()


if __name__ == "__main__":
    main()
