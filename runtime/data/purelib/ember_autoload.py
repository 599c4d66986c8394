"""Imported at interpreter start-up by ember.pth when EMBER is set.

Ember acts on the main interpreter only (its module is single-phase, like
every pyo3 module): in a subinterpreter this does nothing, silently, so that
EMBER=1 programs using concurrent.interpreters behave as without Ember.
"""


def _in_main_interpreter() -> bool:
    # _thread is built in: importing _interpreters (an extension module)
    # would cost every EMBER=1 process a third of a millisecond.
    try:
        import _thread
        return _thread._is_main_interpreter()
    except Exception:
        return True


if _in_main_interpreter():
    try:
        import ember
    except ImportError as e:
        import sys

        print(f"ember: EMBER is set but Ember cannot be imported ({e}); Ember stays off", file=sys.stderr)
    else:
        ember._start_from_environment()
