# These modules are fixtures for tests/cpython/selftest.py, run by CPython's
# regrtest (some fail on purpose); pytest must not collect them.
collect_ignore_glob = ["test_*.py"]
