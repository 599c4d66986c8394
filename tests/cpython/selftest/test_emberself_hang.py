"""Fixture for tests/cpython/selftest.py: hangs under Ember (run with a short
--timeout)."""

import sys
import time
import unittest

_ember = sys.modules.get("ember")
UNDER_EMBER = bool(_ember is not None and _ember.is_enabled())


class Hang(unittest.TestCase):
    def test_hangs_under_ember(self):
        if UNDER_EMBER:
            time.sleep(600)


if __name__ == "__main__":
    unittest.main()
