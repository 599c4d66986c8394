"""Fixture for tests/cpython/selftest.py: passes alike in both runs, and runs
enough Python code for Ember's hook to see."""

import unittest


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Same(unittest.TestCase):
    def test_fib(self):
        self.assertEqual(fib(15), 610)

    def test_generator(self):
        def gen():
            yield from range(3)
        self.assertEqual(list(gen()), [0, 1, 2])


if __name__ == "__main__":
    unittest.main()
