"""Fixture for tests/cpython/selftest.py: the worker process dies under Ember."""

import os
import sys
import unittest

# The extension: the EMBER=1 autoload loads it, not the package.
_ember = sys.modules.get("ember._ember")
UNDER_EMBER = bool(_ember is not None and _ember._installed() == "ember")


class Crash(unittest.TestCase):
    def test_exits_under_ember(self):
        if UNDER_EMBER:
            sys.stdout.flush()
            os._exit(7)


if __name__ == "__main__":
    unittest.main()
