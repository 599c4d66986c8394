"""Fixture for tests/cpython/selftest.py: testcases that behave differently
under Ember, on purpose, so that the runner has differences to find."""

import dis
import sys
import unittest

# The extension: the EMBER=1 autoload loads it, not the package.
_ember = sys.modules.get("ember._ember")
UNDER_EMBER = bool(_ember is not None and _ember._installed() == "ember")


class Same(unittest.TestCase):
    def test_passes(self):
        pass

    def test_fails_in_both(self):
        self.fail("fails in both runs")

    @unittest.skip("skipped in both runs")
    def test_skipped(self):
        pass

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.fail("expected")


class Differ(unittest.TestCase):
    def test_fails_only_under_ember(self):
        self.assertFalse(UNDER_EMBER, "fails under Ember only")

    def test_fails_only_stock(self):
        self.assertTrue(UNDER_EMBER, "fails under stock only")

    def test_subtest_fails_only_under_ember(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertFalse(UNDER_EMBER and i == 1)

    def test_error_instead_of_failure(self):
        if UNDER_EMBER:
            raise TypeError("an error under Ember")
        self.fail("a failure under stock")

    @unittest.skipIf(UNDER_EMBER, "skipped under Ember only")
    def test_skipped_only_under_ember(self):
        pass


class AnyFrameEvaluator(unittest.TestCase):
    def test_fails_under_any_frame_evaluator(self):
        # CPython does not specialise calls to Python functions while a
        # PEP 523 frame evaluator is installed (it could not inline them):
        # fails under Ember and under the pep523 baseline alike.
        def callee():
            pass

        def loop():
            for _ in range(100):
                callee()

        loop()
        loop()
        names = {i.opname for i in dis.get_instructions(loop, adaptive=True)}
        self.assertIn("CALL_PY_EXACT_ARGS", names)


class SetUpClassFailsUnderEmber(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if UNDER_EMBER:
            raise RuntimeError("setUpClass fails under Ember")

    def test_something(self):
        pass


if __name__ == "__main__":
    unittest.main()
