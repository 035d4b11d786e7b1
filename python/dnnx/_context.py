"""The Context class, the current context of a block, selection rows."""

import contextlib
import contextvars
import sys
from collections import namedtuple

from . import _dnnx
from ._arrays import _module_of
from ._errors import InvalidArgument

Row = namedtuple("Row", "id status reason time workspace deterministic notes energy",
                 defaults=(None,))
Row.__doc__ = """One candidate of an op: its id, status ('supported' / 'unsupported' in a listing;
'ok', 'unsupported', 'over_workspace_limit', 'not_deterministic', 'failed', 'abandoned' or
'not_timed' in a profile), why it did not run, its median time in ms (profiles; None otherwise),
workspace bytes, whether it is deterministic, its notes, and its energy per call in joules where
it was measured (profiles with ``profile_energy``, the contenders of the energy policies; None
otherwise)."""

_current = contextvars.ContextVar("dnnx_context", default=None)
_default = None

# TuneOptions fields that take a value as they are.
_TUNE_FIELDS = ("fwd", "bwd_data", "bwd_weights", "workspace_limit", "deterministic", "fastest",
                "verbose", "benchmark_limit", "warmup_runs", "timing_runs", "abandon_factor",
                "variant_factor", "time_naive", "final_round", "final_loop_ms",
                "final_contenders", "host_tie",
                "search_budget_ms", "late_plan_share", "energy_window_ms", "energy_repeats",
                "profile_energy")
_OP_DIRECTIONS = dict(_dnnx.ops())


def _apply(tune, options):
    """Sets `options` on a TuneOptions: its fields by name, and per op either one policy for all
    of the op's directions (``pool="exhaustive"``) or a dict per direction
    (``pool={"bwd": "exhaustive"}``)."""
    for name, value in options.items():
        if name in _TUNE_FIELDS:
            setattr(tune, name, value)
            continue
        try:
            policies = getattr(tune, name)
        except AttributeError:
            policies = None
        if not isinstance(policies, _dnnx.OpPolicies):
            raise InvalidArgument(
                f"tuning option '{name}' is neither a TuneOptions field ({', '.join(_TUNE_FIELDS)})"
                f" nor an op ({', '.join(_OP_DIRECTIONS)})")
        if isinstance(value, dict):
            for direction, policy in value.items():
                setattr(policies, direction, policy)
        else:
            for direction in policies.directions:
                setattr(policies, direction, value)


class Context(_dnnx.Context):
    """Where and how ops run: ``dnnx.Context(backend="auto", device=0, type_config="float")``.

    ``ctx.tune`` holds the selection options (``ctx.tune.fwd = "exhaustive"``,
    ``ctx.tune.pool.bwd = "fixed:<id>"``, ``ctx.tune.workspace_limit = 64 << 20``, ...).
    ``with ctx:`` makes it the context of the ops called in the block without ``ctx=``;
    ``with ctx.tuning(**options):`` changes its options for a block only.
    """

    def __init__(self, backend="auto", device=0, type_config="float"):
        # A dnnx context as `backend`: a copy of it (sharing its backend state, options copied).
        if isinstance(backend, _dnnx.Context):
            super().__init__(backend)
        else:
            super().__init__(backend, device, type_config)
        self._tokens = []

    @classmethod
    def from_env(cls):
        """A context from DNNX_BACKEND, DNNX_DEVICE, DNNX_TYPE and the DNNX_* tuning variables."""
        return cls(_dnnx.Context.from_env())

    def copy(self):
        """A copy sharing the backend state, with its own tuning options."""
        return Context(self)

    def __enter__(self):
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc):
        _current.reset(self._tokens.pop())
        return False

    def tuning(self, **options):
        """Sets tuning options for a block and restores the previous ones after it::

            with ctx.tuning(fwd="exhaustive", workspace_limit=1 << 26, pool={"bwd": "heuristic"}):
                ...
        """
        return _tuned(self, options)

    def with_stream(self, stream):
        """A copy whose ops go on the CUDA stream `stream`: a cudaStream_t as an int (0: the
        backend's own stream), or an object with ``cuda_stream`` (torch.cuda.Stream) or ``ptr``
        (cupy.cuda.Stream), whose default stream is the legacy default stream. cudnn only."""
        handle = getattr(stream, "cuda_stream", None)
        if handle is None:
            handle = getattr(stream, "ptr", stream)
        if handle == 0 and not isinstance(stream, int):
            # A framework's default stream (Note [the caller's default stream] in resolve); the
            # int 0 itself keeps its C++ meaning, the backend's own stream.
            handle = _LEGACY_STREAM
        if not isinstance(handle, int):
            raise InvalidArgument(f"stream: expected a CUDA stream or its handle as an int, got "
                                  f"{type(stream).__name__}")
        return Context(_dnnx.Context.with_stream(self, handle))


def default_context():
    """The context ops use outside any ``with ctx:`` block (built from the environment on first
    use, as dnnx::Context::from_env)."""
    global _default
    if _default is None:
        _default = Context.from_env()
    return _default


def set_default_context(context):
    """Replaces the default context (None: built from the environment again on next use)."""
    global _default
    if context is not None and not isinstance(context, _dnnx.Context):
        raise InvalidArgument(f"set_default_context: expected a dnnx.Context, got "
                              f"{type(context).__name__}")
    _default = context


def current(context=None):
    """`context` if given, else the one of the enclosing ``with ctx:`` block, else the default."""
    if context is not None:
        if not isinstance(context, _dnnx.Context):
            raise InvalidArgument(f"ctx: expected a dnnx.Context, got {type(context).__name__}")
        return context
    return _current.get() or default_context()


_raw_stream = []  # torch._C._cuda_getCurrentRawStream (or None), looked up once


def _caller_stream(array):
    """The CUDA stream the caller's framework queues its work on for `array`'s device (PyTorch's
    or CuPy's current stream), or None for host arrays and other frameworks."""
    framework = _module_of(array)
    if framework == "torch":
        if not array.is_cuda:
            return None
        torch = sys.modules["torch"]
        if not _raw_stream:
            _raw_stream.append(getattr(torch._C, "_cuda_getCurrentRawStream", None))
        raw = _raw_stream[0]
        index = array.get_device()
        if raw is not None and index >= 0:  # the handle, without a Stream object
            return raw(index)
        return torch.cuda.current_stream(array.device).cuda_stream
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(array.device.id):
            return cupy.cuda.get_current_stream().ptr
    return None


# cudaStreamLegacy: the legacy default stream, as a handle the CUDA runtime and DLPack accept.
_LEGACY_STREAM = 1

_device_defaults = {}
_host_default = [None]  # the default context when it runs on the host


_HOST = (1, 0)


def _device_of(array):
    """(DLPack device type, id) of an array; host memory for the buffer protocol."""
    framework = _module_of(array)
    if framework == "numpy":
        return _HOST
    if framework == "torch":  # its __dlpack_device__ is Python code, far slower than this
        return (2, array.get_device()) if array.is_cuda else _HOST
    if array is not None and hasattr(array, "__dlpack_device__"):
        try:
            device_type, device_id = array.__dlpack_device__()
            return int(device_type), int(device_id)
        except Exception:  # a broken producer: the C++ module names the problem
            pass
    return _HOST


def _default_for(array):
    """The default context for `array`'s device: the default context where it runs on that
    device, else one of that device (cudnn for CUDA memory; cpu, else reference, for host memory)
    with the default context's tuning options."""
    default = default_context()
    device_type, device_id = _device_of(array)
    if device_type in (1, 3) and default is _host_default[0]:
        return default
    wanted = f"cuda:{device_id}" if device_type in (2, 13) else "cpu"
    if device_type not in (1, 2, 3, 13) or default.device == wanted:
        if wanted == "cpu":
            _host_default[0] = default  # host arrays run on it until the default changes
        return default
    context = _device_defaults.get(wanted)
    if context is None:
        if wanted == "cpu":
            backend = "cpu" if _dnnx.backend_available("cpu")[0] else "reference"
            context = Context(backend, 0, default.type_config)
        else:
            context = Context("cudnn", device_id, default.type_config)
        _device_defaults[wanted] = context
    context.tune = default.tune
    return context


def resolve(context, array):
    """The context a call on `array` runs on. `context` if given, else the one of the enclosing
    ``with ctx:`` block, else the default context for the array's device (_default_for: host
    arrays run on the host, CUDA arrays on their GPU, whatever the default context resolved
    to). A cudnn context on the backend's own stream then moves onto the caller's current CUDA
    stream when `array` is a PyTorch or CuPy array on the GPU, so the op is ordered with the
    caller's work on that stream without any synchronisation (docs/python.md, "Streams")."""
    if context is None:
        context = _current.get()
        if context is None:
            context = _default_for(array)
    elif not isinstance(context, _dnnx.Context):
        raise InvalidArgument(f"ctx: expected a dnnx.Context, got {type(context).__name__}")
    if array is None or context.stream or context.backend != "cudnn":
        return context
    stream = _caller_stream(array)
    if stream is None:
        return context
    # Note [the caller's default stream]: the handle 0 is the legacy default stream, which does
    # not order with dnnx's own stream (a non-blocking one), so an op on that stream runs on
    # cudaStreamLegacy (handle 1) instead, as DLPack's stream argument names it.
    return _on_stream(context, stream or _LEGACY_STREAM)


# Note [contexts on the caller's stream]
# A layer call on a CUDA tensor runs on context.with_stream(<the caller's stream>), and making
# that copy costs about 9 us on an H200 host (two C++ Context copies and the Python wrapper),
# more than the binding's own work for a small op. The copies are kept per (context, stream) and
# handed out again while the context's options and choice cache are still those the copy was made
# with (an option changed on the context since makes a new copy); the table is bounded.
_stream_copies = {}


def _on_stream(context, stream):
    key = (id(context), stream)
    kept = _stream_copies.get(key)
    if kept is not None and kept[0] is context and kept[1].tune == context.tune and \
            kept[1].choice_cache is context.choice_cache:
        return kept[1]
    copy = context.with_stream(stream)
    if len(_stream_copies) >= 64:
        _stream_copies.clear()
    _stream_copies[key] = (context, copy)
    return copy


@contextlib.contextmanager
def _tuned(context, options):
    saved = context.tune.copy()
    try:
        _apply(context.tune, options)
        yield context
    finally:
        context.tune = saved


def tuning(**options):
    """``with dnnx.tuning(...)``: ``current().tuning(...)``."""
    return _tuned(current(), options)


class Profile(list):
    """The rows of a profile (fastest first, then the rest), with ``chosen`` (the id exhaustive
    selection picks), ``table()``, ``json()``, ``repro``, ``desc``, ``backend``, ``wall_ms``, and
    ``energy_meter`` (with ``profile_energy``: the counter read, or why none was; else "")."""

    def __init__(self, result):
        super().__init__(Row(*row) for row in result.rows)
        self.result = result
        self.chosen = result.chosen
        self.repro = result.repro
        self.desc = result.desc
        self.backend = result.backend
        self.op = result.op
        self.direction = result.direction
        self.wall_ms = result.wall_ms
        self.energy_meter = result.energy_meter

    def table(self):
        return self.result.table()

    def json(self):
        return self.result.json()


def _check_desc(desc):
    if not hasattr(desc, "key") or not hasattr(type(desc), "fields"):
        raise InvalidArgument(f"desc: expected a dnnx desc (ConvDesc, PoolDesc, ...), got "
                              f"{type(desc).__name__}")


def algos(desc, direction="fwd", ctx=None):
    """Every candidate of the context's backend for (desc, direction), in priority order, nothing
    run: a list of Row (time is None)."""
    _check_desc(desc)
    return [Row(*row) for row in _dnnx.algos(current(ctx), desc, direction)]


def select(desc, direction="fwd", ctx=None):
    """The choice the context's policy makes for (desc, direction) (may time candidates;
    cached): a Choice (id, policy, time_ms, workspace, ...)."""
    _check_desc(desc)
    return _dnnx.select(current(ctx), desc, direction)


def profile(desc, direction="fwd", ctx=None):
    """Times every candidate for (desc, direction) on scratch tensors: a Profile (list of Row)."""
    _check_desc(desc)
    return Profile(_dnnx.profile(current(ctx), desc, direction))
