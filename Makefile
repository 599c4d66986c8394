# The two commands of the README. Everything runs inside the provisioned
# CPython 3.14 environment through dev/env (provisioned on first use).
.PHONY: demo test test-full test-arm64 test-refleak test-dbg env

demo:
	EMBER_MAX_TIER=1 EMBER_TIER1_THRESHOLD=2 dev/env python -m ember --stats benches/workloads/demo.py

test:
	bash dev/test

# The long suites: CPython's full regression test list under Ember, compared
# test for test with stock CPython.
test-full:
	dev/env python tests/cpython/regrtest.py --list full

# Reference leaks (issue 4): CPython's debug build (python3.14d) with Ember's
# debug build (dev/env --dbg), regrtest -R 3:3 on lists/refleak.txt, stock and
# every function at tier 1 at its first call; the leaking modules must match.
test-refleak:
	dev/env --dbg python tests/cpython/regrtest.py --dbg --list refleak --config ember-t1 --huntrleaks 3:3

# The pytest suite on CPython's debug build (python3.14d, its assertions on)
# with Ember's debug build (dev/env --dbg; about a minute).
test-dbg:
	dev/env --dbg python -m pytest tests/python -q -p no:cacheprovider

# arm64 under qemu-user (issue 5): the pytest suite (its differential tests
# run every snippet with every function compiled at tier 1 at first call) and
# CPython's arm64 list with ember-t1, compared test for test with stock arm64.
test-arm64:
	dev/env --arch arm64 python -m pytest tests/python -q -p no:cacheprovider
	dev/env --arch arm64 python tests/cpython/regrtest.py --list arm64 --config ember-t1 -j2

env:
	dev/provision
