"""Shared fixtures of the dnnx Python tests: the backends to run on, and contexts for them."""

import os

# The tests must not read or write the user's choice-cache file (scripts/test.sh sets the same).
os.environ.setdefault("DNNX_CACHE", "off")

import pytest  # noqa: E402

import dnnx  # noqa: E402

HOST_BACKENDS = [name for name in ("reference", "cpu") if dnnx.backend_available(name)[0]]


@pytest.fixture(params=HOST_BACKENDS)
def ctx(request):
    """A context per host backend built here (reference always; cpu where oneDNN is built)."""
    return dnnx.Context(request.param)


@pytest.fixture
def reference():
    return dnnx.Context("reference")
