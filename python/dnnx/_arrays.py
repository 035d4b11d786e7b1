"""Arrays across the boundary: what the C++ module receives, and outputs in the caller's framework.

Inputs go to the C++ module as they are: it reads any object with ``__dlpack__`` or the buffer
protocol without copying. Outputs are allocated by the framework of the call's first array input
(NumPy in, NumPy out; torch in, torch out on the same device; CuPy likewise), dense in the op's
layout, unless the caller passes ``out=``.
"""

import sys

from . import _dnnx
from ._errors import InvalidArgument, Unsupported

_TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i32": "int32",
                 "i64": "int64"}


_modules = {}


def _module_of(array):
    """The top-level module of an array's class ('numpy', 'torch', 'cupy', ...), cached per
    class."""
    cls = type(array)
    module = _modules.get(cls)
    if module is None:
        module = _modules[cls] = cls.__module__.split(".", 1)[0]
    return module


def dtype_name(array, name="array"):
    """The dnnx dtype name ('f32', 'f16', 'bf16', 'i32', 'i64') of an array's dtype."""
    dtype = getattr(array, "dtype", None)
    if dtype is None:
        raise InvalidArgument(f"{name}: {type(array).__name__} has no dtype; pass an array "
                              "(NumPy, PyTorch, CuPy or any object with __dlpack__)")
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
    return _dnnx.parse_dtype(text)


def layout_name(array, name="array"):
    """'nchw' or 'nhwc': the dense layout of an array's strides (InvalidArgument otherwise).
    A PyTorch tensor in one of its memory formats is answered from the tensor's own checks, which
    read no data: FakeTensors (torch.compile's shape propagation) have shapes and strides but no
    data pointer for the module to view."""
    if _module_of(array) == "torch":
        torch = sys.modules["torch"]
        if array.layout == torch.strided:
            if array.is_contiguous():
                return "nchw"
            rank = array.dim()
            if (rank == 4 and array.is_contiguous(memory_format=torch.channels_last)) or \
                    (rank == 5 and array.is_contiguous(memory_format=torch.channels_last_3d)):
                return "nhwc"
    return _dnnx.layout_of(array, name)


def shape_of(array, name="array"):
    shape = getattr(array, "shape", None)
    if shape is None:
        raise InvalidArgument(f"{name}: {type(array).__name__} has no shape; pass an array "
                              "(NumPy, PyTorch, CuPy or any object with __dlpack__)")
    return tuple(int(size) for size in shape)


def arg(array):
    """What the C++ module is given for an array argument: the array itself. PyTorch tensors,
    those that require grad too, are read through their attributes, not DLPack (whose export
    refuses tensors that require grad): python/src/bindings.hpp, Note [torch tensors in]."""
    return array


def _physical(dims, layout):
    """The dense shape in memory order and the permutation back to the logical order."""
    rank = len(dims)
    if layout == "nhwc" and rank >= 3:
        physical = (dims[0],) + tuple(dims[2:]) + (dims[1],)
        return physical, (0, rank - 1) + tuple(range(1, rank - 1))
    return tuple(dims), tuple(range(rank))


def _numpy_empty(like, dims, dtype, layout):
    import numpy
    if dtype == "bf16":
        raise Unsupported("NumPy has no bfloat16: pass torch tensors (or any DLPack bfloat16 "
                          "array) and an out= array for bf16 results")
    if layout != "nhwc":
        return numpy.empty(dims, dtype=_TORCH_DTYPES[dtype])
    physical, order = _physical(dims, layout)
    return numpy.empty(physical, dtype=_TORCH_DTYPES[dtype]).transpose(order)


_torch_dtypes = {}


def _torch_empty(like, dims, dtype, layout):
    torch_dtype = _torch_dtypes.get(dtype)
    if torch_dtype is None:
        torch_dtype = _torch_dtypes[dtype] = getattr(sys.modules["torch"], _TORCH_DTYPES[dtype])
    if layout != "nhwc":  # new_empty: like's device, without parsing a device argument
        return like.new_empty(dims, dtype=torch_dtype)
    # A tensor of its own in the channels_last format, not a permuted view of one: autograd
    # forbids in-place changes (ResNet's `out += identity`) to a view a custom Function returns.
    torch = sys.modules["torch"]
    rank = len(dims)
    memory_order = (0, *range(2, rank), 1) if rank >= 3 else tuple(range(rank))
    strides = [0] * rank
    step = 1
    for axis in reversed(memory_order):  # innermost first
        strides[axis] = step
        step *= max(dims[axis], 1)
    return torch.empty_strided(dims, strides, dtype=torch_dtype, device=like.device)


def _cupy_empty(like, dims, dtype, layout):
    cupy = sys.modules["cupy"]
    if dtype == "bf16":
        raise Unsupported("CuPy has no bfloat16: pass torch tensors or an out= array")
    physical, order = _physical(dims, layout)
    with cupy.cuda.Device(like.device.id):
        return cupy.empty(physical, dtype=_TORCH_DTYPES[dtype]).transpose(order)


def _other_empty(like, dims, dtype, layout):
    device = like.__dlpack_device__() if hasattr(like, "__dlpack_device__") else (1, 0)
    if device[0] in (1, 3):  # host memory: NumPy holds the result
        return _numpy_empty(like, dims, dtype, layout)
    raise Unsupported(f"results for a {type(like).__name__} on DLPack device {tuple(device)}: "
                      "dnnx allocates outputs with NumPy, PyTorch or CuPy; pass out=")


_ALLOCATORS = {"numpy": _numpy_empty, "torch": _torch_empty, "cupy": _cupy_empty}


def empty_like(like, dims, dtype, layout="nchw"):
    """A dense array of `dims` and `dtype` in `layout`, from the framework of `like`, on its
    device."""
    return _ALLOCATORS.get(_module_of(like), _other_empty)(like, tuple(dims), dtype, layout)


def output(out, like, dims, dtype, layout="nchw"):
    """`out` when the caller gave one (the C++ module checks it), else a new array like `like`."""
    if out is not None:
        return out
    return empty_like(like, dims, dtype, layout)

