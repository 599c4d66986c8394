"""The extension module as built: what loading it costs every process."""

import shutil
import subprocess

import pytest

import ember._ember


@pytest.mark.skipif(shutil.which("ldd") is None, reason="needs ldd")
def test_no_libgcc_s_to_load():
    # GCC's unwinder is linked in statically (runtime/build.rs): loading
    # libgcc_s.so.1 as well cost every process that imports Ember about
    # 0.15 ms (its constructor runs CPUID, which traps under virtualisation).
    out = subprocess.run(["ldd", ember._ember.__file__], capture_output=True, text=True, check=True).stdout
    assert "libc.so" in out
    assert "libgcc_s" not in out
