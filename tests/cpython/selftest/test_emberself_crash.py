"""Fixture for tests/cpython/selftest.py: the worker process dies under Ember."""

import os
import sys
import unittest

_ember = sys.modules.get("ember")
UNDER_EMBER = bool(_ember is not None and _ember.is_enabled())


class Crash(unittest.TestCase):
    def test_exits_under_ember(self):
        if UNDER_EMBER:
            sys.stdout.flush()
            os._exit(7)


if __name__ == "__main__":
    unittest.main()
