"""The extension module keeps what it links from static archives to itself (Note [static
archives in the module] in python/CMakeLists.txt): none of the C++ runtime's own functions is
among the module's exported symbols, whatever the toolchain links statically."""

import shutil
import subprocess

import pytest

import dnnx
from dnnx import _dnnx


def loaded_library(fragment):
    """The path of the shared library of this process whose file name contains `fragment`."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if fragment in path.rsplit("/", 1)[-1]:
                return path
    return None


def exported(path, kinds):
    """The names (without their version) of the symbols `path` defines and exports, of the nm
    types in `kinds`."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] in kinds:
            names.add(fields[2].split("@", 1)[0])
    return names


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils' nm is not installed")
def test_module_exports_none_of_the_cxx_runtime():
    runtime = loaded_library("libstdc++.so")
    if runtime is None:
        pytest.skip("no libstdc++ in this process (another C++ runtime)")
    # The runtime's own functions (T), not the template instances every user of its headers
    # emits as weak symbols.
    own = exported(runtime, {"T"})
    assert len(own) > 500, f"{runtime}: {len(own)} functions read"
    shared = exported(_dnnx.__file__, {"T", "W", "D", "B", "R", "V", "u", "i"}) & own
    assert not shared, (f"{_dnnx.__file__} exports {len(shared)} of {runtime}'s functions, "
                        f"e.g. {sorted(shared)[:3]}: libdnnx would call the module's copies")
    # The module still answers, through libdnnx's own C++ runtime.
    assert "conv2d" in str(dnnx.ConvDesc.from_shapes([1, 8, 5, 5], [8, 8, 3, 3], 1, 1))
