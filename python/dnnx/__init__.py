"""dnnx for Python: deep-learning primitives with per-layer, per-direction algorithm selection.

Every op takes a desc (``dnnx.ConvDesc``, ``dnnx.PoolDesc``, ...: the C++ structs, fields as
keyword arguments) and arrays of any framework that speaks DLPack or the buffer protocol (NumPy,
PyTorch on CPU or CUDA, CuPy), read and written in place without a copy; results come back in
the framework of the inputs, or go into ``out=``. ``dnnx.algos``, ``dnnx.select`` and
``dnnx.profile`` list, choose and time the candidates of any desc; ``dnnx.Context`` holds the
backend and the tuning options; ``dnnx.cache`` is the process-wide choice cache. docs/python.md
has the whole API.
"""

import atexit

from ._errors import (BackendFailure, Error, Internal, InvalidArgument, OutOfMemory,  # noqa: F401
                      Unsupported)
from . import _dnnx  # noqa: E402  (needs dnnx._errors first: it raises those classes)
from ._context import (Context, Profile, Row, algos, current, default_context,  # noqa: F401
                       profile, select, set_default_context, tuning)
from ._dnnx import (ActivationDesc, AddDesc, AdamDesc, BatchNormDesc, ChoiceCache,  # noqa: F401
                    ConvDesc, ConvFusedDesc, CrossEntropyDesc, DropoutDesc, FillDesc, MatmulDesc,
                    PoolDesc, RnnDesc, SavedState, SgdDesc, SoftmaxDesc, TuneOptions, UnscaleDesc,
                    UpdateScaleDesc, backend_available, backend_version, resolve_backend,
                    stop_background_work)
from ._random import Generator, default_generator, manual_seed  # noqa: F401
from .ops import (activation, add, batch_norm, conv, conv_fused, cross_entropy,  # noqa: F401
                  dropout, fill, matmul, pool, rnn, softmax)
from . import init  # noqa: F401,E402

__version__ = _dnnx.version


def _stop_background_work_at_exit():
    # A runtime-compiled plan still building when the interpreter exits would run under the C
    # libraries' exit handlers: stop the builds first (dnnx::stop_background_work).
    _dnnx.stop_background_work()


atexit.register(_stop_background_work_at_exit)


def layout_of(array):
    """'nchw' (channels_first) or 'nhwc' (channels_last), the dense layout of `array`'s strides;
    InvalidArgument for a non-dense array."""
    return _dnnx.layout_of(array, "array")


def data_ptr(array):
    """The address dnnx sees for `array`'s first element (no copy is made to get it)."""
    return _dnnx.data_ptr(array)


def __getattr__(name):
    # dnnx.cache: the process-wide choice cache, created (and its file read) on first use.
    if name == "cache":
        return _dnnx.ChoiceCache.process()
    # dnnx.optim and dnnx.amp need PyTorch: imported on first use.
    if name in ("optim", "amp"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dnnx' has no attribute '{name}'")
