# The two commands of the README. Everything runs inside the provisioned
# CPython 3.14 environment through dev/env (provisioned on first use).
.PHONY: demo test test-full env

demo:
	EMBER_MAX_TIER=1 EMBER_TIER1_THRESHOLD=2 dev/env python -m ember --stats benches/workloads/demo.py

test:
	bash dev/test

# The long suites: CPython's full regression test list under Ember, compared
# test for test with stock CPython.
test-full:
	dev/env python tests/cpython/regrtest.py --list full

env:
	dev/provision
