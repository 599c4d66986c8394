"""Start-up of every process Ember's benchmark runner starts (benches/site is
first on their PYTHONPATH, pyperf's workers included).

First runs the sitecustomize this one shadows (Debian ships one in
/usr/lib/python3.14), then applies the configuration named by EBENCH_CONFIG
(benches/site/ebench.py). Does nothing else when EBENCH_CONFIG is unset.
"""


def _chain() -> None:
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.getcwd()) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError:
        pass
    except Exception as e:  # as site.py does for a broken sitecustomize
        print(f"Error in sitecustomize ({spec.origin}); {type(e).__name__}: {e}", file=sys.stderr)


_chain()
del _chain

import os as _os  # noqa: E402

if _os.environ.get("EBENCH_CONFIG"):
    import ebench as _ebench

    _ebench.startup()
    del _ebench
del _os
