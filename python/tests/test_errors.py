"""Errors: the class hierarchy, the fields the C++ error carries, and garbage arguments that must
raise (never crash the interpreter or let a C++ exception through)."""

import ctypes

import numpy as np
import pytest

import dnnx

KINDS = {
    "InvalidArgument": ValueError,
    "Unsupported": NotImplementedError,
    "OutOfMemory": MemoryError,
    "BackendFailure": RuntimeError,
    "Internal": RuntimeError,
}


@pytest.mark.parametrize("kind", KINDS)
def test_error_classes(kind):
    cls = getattr(dnnx, kind)
    assert issubclass(cls, dnnx.Error) and issubclass(cls, KINDS[kind])
    assert cls.kind == kind
    raised = cls("message")
    assert raised.message == "message" and raised.op == "" and raised.repro == ""


def conv_arrays():
    src = np.zeros((1, 3, 8, 8), np.float32)
    weights = np.zeros((4, 3, 3, 3), np.float32)
    return dnnx.conv.desc_for(src, weights, padding=1), src, weights


def test_op_errors_carry_op_and_repro(reference):
    desc, src, weights = conv_arrays()
    wrong = np.zeros((1, 3, 7, 8), np.float32)
    with pytest.raises(dnnx.InvalidArgument) as caught:
        dnnx.conv.fwd(desc, wrong, weights, ctx=reference)
    error = caught.value
    assert isinstance(error, ValueError) and error.kind == "InvalidArgument"
    assert error.op.startswith("conv") and "dnnx profile conv" in error.repro
    assert "7" in str(error) and error.message and error.where


def test_wrong_dtype_is_invalid_argument(reference):
    desc, src, weights = conv_arrays()
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.conv.fwd(desc, src.astype(np.float16), weights, ctx=reference)


def test_unavailable_backend_is_unsupported():
    if dnnx.backend_available("cudnn")[0]:
        pytest.skip("a GPU is usable here")
    with pytest.raises(dnnx.Unsupported) as caught:
        dnnx.Context("cudnn")
    assert isinstance(caught.value, NotImplementedError) and caught.value.kind == "Unsupported"


def test_failed_allocation_is_out_of_memory(reference):
    # Profiling allocates scratch tensors of the desc's size: 4 EiB exceed any address space, so
    # not even an overcommitting kernel grants them (16 TiB it may, and then kill the process).
    huge = dnnx.ActivationDesc(kind="relu", dims=(1 << 30, 1 << 30))
    with pytest.raises(dnnx.OutOfMemory) as caught:
        dnnx.profile(huge, "fwd", ctx=reference)
    assert isinstance(caught.value, MemoryError) and caught.value.kind == "OutOfMemory"
    assert "bytes" in caught.value.message and "dnnx profile act" in caught.value.repro


def test_bad_context_arguments():
    with pytest.raises(dnnx.InvalidArgument, match="tpu"):
        dnnx.Context("tpu")
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.Context("reference", type_config="double")
    with pytest.raises(TypeError):
        dnnx.Context(3)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.conv.fwd(conv_arrays()[0], *conv_arrays()[1:], ctx="reference")
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.set_default_context("reference")
    if not dnnx.backend_available("cudnn")[0]:
        with pytest.raises(dnnx.InvalidArgument):
            dnnx.Context("reference").with_stream(1)


GARBAGE = [None, "text", 3, 2.5, object(), [1.0, 2.0], {"a": 1}]


@pytest.mark.parametrize("garbage", GARBAGE, ids=[type(g).__name__ for g in GARBAGE])
def test_garbage_arrays_raise(reference, garbage):
    desc, src, weights = conv_arrays()
    with pytest.raises((TypeError, dnnx.Error)):
        dnnx.conv.fwd(desc, garbage, weights, ctx=reference)
    with pytest.raises((TypeError, dnnx.Error)):
        dnnx.conv.fwd(desc, src, weights, out=garbage if garbage is not None else "x",
                      ctx=reference)
    with pytest.raises((TypeError, dnnx.Error)):
        dnnx.conv.desc_for(garbage, weights)
    with pytest.raises((TypeError, dnnx.Error)):
        dnnx.algos(garbage)


def test_garbage_desc_fields():
    with pytest.raises(dnnx.InvalidArgument, match="no field 'strides'"):
        dnnx.ConvDesc(strides=2)
    with pytest.raises(dnnx.InvalidArgument, match="stride"):
        dnnx.ConvDesc(stride="x")
    with pytest.raises(dnnx.InvalidArgument, match="1 to 3"):
        dnnx.ConvDesc(stride=(1, 1, 1, 1))
    with pytest.raises(dnnx.InvalidArgument, match="f64"):
        dnnx.ConvDesc(dtype="f64")
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.PoolDesc(mode="median")
    with pytest.raises(TypeError):
        dnnx.ConvDesc(batch="two")
    with pytest.raises(TypeError):
        dnnx.ConvDesc(batch=1 << 70)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.ActivationDesc(dims=(1, 2, 3, 4, 5, 6))
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.ActivationDesc(dims=3)
    with pytest.raises(dnnx.InvalidArgument, match="batch"):
        dnnx.ConvDesc(batch=-1).validate()
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.ConvDesc.from_shapes((1, 3, 8, 8), (4, 2, 3, 3))
    with pytest.raises(dnnx.InvalidArgument, match="True"):
        dnnx.ConvDesc(stride=(True, 1))
    with pytest.raises(dnnx.InvalidArgument, match="1.5"):
        dnnx.ActivationDesc(dims=(2, 1.5))
    with pytest.raises(dnnx.InvalidArgument, match="64 bits"):
        dnnx.ActivationDesc(dims=(2, 1 << 70))


def test_invalid_desc_in_a_call_is_invalid_argument(reference):
    desc, src, weights = conv_arrays()
    desc.batch = -3
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.conv.fwd(desc, src, weights, ctx=reference)
    bad = dnnx.ActivationDesc(kind="elu", alpha=float("nan"), dims=(2, 2))
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.activation.fwd(bad, np.zeros((2, 2), np.float32), ctx=reference)


def test_labels_out_of_range(reference):
    logits = np.zeros((2, 3), np.float32)
    labels = np.array([0, 7], np.int64)
    desc = dnnx.cross_entropy.desc_for(logits, labels)
    with pytest.raises(dnnx.InvalidArgument, match="7"):
        dnnx.cross_entropy.fwd(desc, logits, labels, ctx=reference)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class ClaimsDevice:
    """A DLPack producer whose capsule says its (host) memory is on `device_type`: what a
    CUDA tensor looks like to the module, without a GPU. Only the device is ever looked at."""

    def __init__(self, device_type, shape=(2, 3)):
        self.host = np.zeros(shape, np.float32)
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.managed = _DLManagedTensor()
        tensor = self.managed.dl_tensor
        tensor.data = self.host.ctypes.data
        tensor.device = _DLDevice(device_type, 0)
        tensor.ndim = len(shape)
        tensor.dtype = _DLDataType(2, 32, 1)  # float32
        tensor.shape = self.shape
        tensor.strides = None

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_void_p]
        return new(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (self.managed.dl_tensor.device.device_type, 0)


def test_memory_on_another_device_is_refused(reference):
    desc = dnnx.ActivationDesc(kind="relu", dims=(2, 3))
    cuda = ClaimsDevice(2)  # kDLCUDA
    with pytest.raises(dnnx.InvalidArgument, match="cuda:0") as caught:
        dnnx.activation.fwd(desc, cuda, out=np.zeros((2, 3), np.float32), ctx=reference)
    assert "context runs on cpu" in str(caught.value)
    with pytest.raises(dnnx.InvalidArgument, match="device type 4"):
        dnnx.activation.fwd(desc, ClaimsDevice(4), out=np.zeros((2, 3), np.float32),
                            ctx=reference)
    with pytest.raises(dnnx.Unsupported, match="out="):
        dnnx.activation.fwd(desc, ClaimsDevice(2), ctx=reference)


def test_interpreter_survives_a_burst_of_errors(reference):
    desc, src, weights = conv_arrays()
    for _ in range(200):
        with pytest.raises(dnnx.Error):
            dnnx.conv.fwd(desc, src[:, :2], weights, ctx=reference)
    assert dnnx.conv.fwd(desc, src, weights, ctx=reference).shape == (1, 4, 8, 8)
