"""Imported at interpreter start-up by ember.pth when EMBER is set.

It loads Ember's extension (`ember._ember`) alone, not the `ember` package:
the extension reads the EMBER* variables and turns Ember on
(runtime/src/config.rs), and importing the package as well cost every such
process about 0.3 ms. The package, imported later, finds the extension
loaded.

Ember acts on the main interpreter only: in a subinterpreter this does
nothing, silently, so that EMBER=1 programs using concurrent.interpreters
behave as without Ember.
"""

import sys


def _in_main_interpreter() -> bool:
    # _thread is built in: importing _interpreters (an extension module)
    # would cost every EMBER=1 process a third of a millisecond.
    try:
        import _thread
        return _thread._is_main_interpreter()
    except Exception:
        return True


def _load_extension():
    """`ember._ember`, found and loaded as `import ember._ember` would find
    and load it, but without running the package's `__init__`: the import
    system's own search and load (its frozen bootstrap, always loaded; the
    private functions `importlib.util.find_spec` and `import` use), so that
    the finders a program installs (an editable install's) are asked as for
    an import."""
    name = "ember._ember"
    if name in sys.modules:
        return sys.modules[name]
    from _frozen_importlib import _find_spec, _load

    package = _find_spec("ember", None)
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("No module named 'ember'", name="ember")
    spec = _find_spec(name, package.submodule_search_locations)
    if spec is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return _load(spec)


if _in_main_interpreter():
    try:
        _ember = _load_extension()
    except ImportError as e:
        print(f"ember: EMBER is set but Ember cannot be imported ({e}); Ember stays off", file=sys.stderr)
    else:
        started, stats_path = _ember._start_from_environment()
        if stats_path:
            # Writing the stats at exit is the package's.
            import ember

            ember._write_stats_at_exit(stats_path)
