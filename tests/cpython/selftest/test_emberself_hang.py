"""Fixture for tests/cpython/selftest.py: hangs under Ember (run with a short
--timeout)."""

import subprocess
import sys
import time
import unittest

# The extension: the EMBER=1 autoload loads it, not the package.
_ember = sys.modules.get("ember._ember")
UNDER_EMBER = bool(_ember is not None and _ember._installed() == "ember")


class Hang(unittest.TestCase):
    def test_hangs_under_ember(self):
        if UNDER_EMBER:
            # A child that outlives the worker when the --timeout ends it:
            # regrtest.py must kill it (selftest.py checks).
            subprocess.Popen([sys.executable, "-c",
                              "import time; time.sleep(600)  # emberself-orphan"])
            time.sleep(600)


if __name__ == "__main__":
    unittest.main()
