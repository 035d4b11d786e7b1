"""Arrays across the boundary: no copies (data pointers compared), results in the caller's
framework and layout, out=, every dtype, and clear errors for what dnnx cannot take."""

import numpy as np
import pytest

import dnnx

torch = pytest.importorskip("torch")


def relu_desc(array):
    return dnnx.activation.desc_for(array, "relu")


def test_numpy_in_numpy_out(reference):
    src = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    dst = dnnx.activation.fwd(relu_desc(src), src, ctx=reference)
    assert type(dst) is np.ndarray and dst.dtype == np.float32 and dst.shape == src.shape
    np.testing.assert_array_equal(dst, np.maximum(src, 0))


def test_torch_in_torch_out(reference):
    src = torch.linspace(-1, 1, 24).reshape(2, 3, 4)
    dst = dnnx.activation.fwd(relu_desc(src), src, ctx=reference)
    assert type(dst) is torch.Tensor and dst.dtype == torch.float32 and dst.device == src.device
    assert torch.equal(dst, torch.relu(src))


def test_inputs_are_not_copied_numpy():
    src = np.ones((2, 3, 4), dtype=np.float32)
    assert dnnx.data_ptr(src) == src.ctypes.data
    view = src[1]  # an offset view: dnnx sees its first element, not the base's
    assert dnnx.data_ptr(view) == view.ctypes.data
    read_only = np.ones(4, dtype=np.float32)
    read_only.flags.writeable = False
    assert dnnx.data_ptr(read_only) == read_only.ctypes.data


def test_inputs_are_not_copied_torch():
    src = torch.ones(2, 3, 4)
    assert dnnx.data_ptr(src) == src.data_ptr()
    grad = torch.ones(3, requires_grad=True)
    assert dnnx.data_ptr(grad.detach()) == grad.data_ptr()
    half = torch.ones(5, dtype=torch.bfloat16)
    assert dnnx.data_ptr(half) == half.data_ptr()


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_out_is_written_in_place(ctx, framework):
    data = np.linspace(-2, 2, 30, dtype=np.float32).reshape(2, 3, 5)
    src = data if framework == "numpy" else torch.from_numpy(data)
    out = np.full_like(data, 7) if framework == "numpy" else torch.full((2, 3, 5), 7.0)
    pointer = dnnx.data_ptr(out)
    returned = dnnx.activation.fwd(relu_desc(src), src, out=out, ctx=ctx)
    assert returned is out and dnnx.data_ptr(out) == pointer
    np.testing.assert_allclose(np.asarray(out), np.maximum(data, 0))


def test_in_place_activation_on_torch(reference):
    src = torch.linspace(-1, 1, 12).reshape(3, 4)
    pointer = src.data_ptr()
    dnnx.activation.fwd(relu_desc(src), src, out=src, ctx=reference)
    assert src.data_ptr() == pointer and bool((src >= 0).all())


def test_requires_grad_tensors_are_read_in_place(reference):
    src = torch.linspace(-1, 1, 6, requires_grad=True)
    dst = dnnx.activation.fwd(relu_desc(src), src, ctx=reference)
    assert torch.equal(dst, torch.relu(src.detach()))


@pytest.mark.parametrize("dtype,name", [(torch.float32, "f32"), (torch.float16, "f16"),
                                        (torch.bfloat16, "bf16")])
def test_float_dtypes_from_torch(ctx, dtype, name):
    src = torch.linspace(-3, 3, 16).reshape(2, 8).to(dtype)
    desc = relu_desc(src)
    assert desc.dtype == name
    dst = dnnx.activation.fwd(desc, src, ctx=ctx)
    assert dst.dtype == dtype and torch.equal(dst.float(), torch.relu(src.float()))


def test_float16_from_numpy(reference):
    src = np.linspace(-3, 3, 16, dtype=np.float16).reshape(4, 4)
    dst = dnnx.activation.fwd(relu_desc(src), src, ctx=reference)
    assert dst.dtype == np.float16
    np.testing.assert_array_equal(dst, np.maximum(src, 0))


def test_bfloat16_result_needs_a_framework_that_has_it():
    src = np.zeros((2, 2), dtype=np.float32)
    desc = relu_desc(src)
    desc.dtype = "bf16"
    with pytest.raises(dnnx.Unsupported, match="bfloat16"):
        dnnx.activation.fwd(desc, src)


def test_integer_dtypes():
    labels64, labels32 = torch.zeros(3, dtype=torch.int64), np.zeros(3, dtype=np.int32)
    logits = torch.zeros(3, 4)
    assert dnnx.cross_entropy.desc_for(logits, labels64).label_dtype == "i64"
    assert dnnx.cross_entropy.desc_for(logits, labels32).label_dtype == "i32"


def test_layouts_from_strides():
    nchw = torch.zeros(2, 3, 4, 5)
    assert dnnx.layout_of(nchw) == "nchw"
    assert dnnx.layout_of(nchw.contiguous(memory_format=torch.channels_last)) == "nhwc"
    assert dnnx.layout_of(torch.zeros(2, 3, 4, 5, 6).contiguous(
        memory_format=torch.channels_last_3d)) == "nhwc"
    # One channel: PyTorch's channels_last strides of a size-1 dim are arbitrary; still dense.
    assert dnnx.layout_of(torch.zeros(2, 1, 4, 5).contiguous(
        memory_format=torch.channels_last)) in ("nchw", "nhwc")
    assert dnnx.layout_of(np.zeros((2, 5, 3), np.float32).transpose(0, 2, 1)) == "nhwc"


def test_channels_last_results_keep_the_layout(reference):
    src = torch.randn(1, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    dst = dnnx.activation.fwd(relu_desc(src), src, ctx=reference)
    assert dst.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(dst, torch.relu(src))


def test_non_dense_arrays_are_refused_clearly(reference):
    strided = torch.zeros(2, 3, 8, 8)[:, :, ::2]
    with pytest.raises(dnnx.InvalidArgument, match="not dense") as caught:
        dnnx.activation.desc_for(strided, "relu")
    assert "src" in str(caught.value)
    dense = torch.zeros(2, 3, 4, 8)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.activation.fwd(relu_desc(dense), strided, ctx=reference)
    transposed = np.zeros((4, 5), np.float32).T  # rank 2 is row-major only
    with pytest.raises(dnnx.InvalidArgument, match="not dense"):
        dnnx.layout_of(transposed)


def test_unsupported_dtype_and_rank_are_named():
    with pytest.raises(dnnx.InvalidArgument, match="float64"):
        dnnx.layout_of(np.zeros(3))
    with pytest.raises(dnnx.InvalidArgument, match="float64"):
        relu_desc(np.zeros(3))
    with pytest.raises(dnnx.InvalidArgument, match="rank 6"):
        dnnx.layout_of(np.zeros((1,) * 6, np.float32))
    with pytest.raises(dnnx.InvalidArgument, match="uint8"):
        dnnx.layout_of(np.zeros(3, np.uint8))


def test_output_dtype_mismatch_is_refused(reference):
    src = np.zeros((2, 3), np.float32)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.activation.fwd(relu_desc(src), src, out=np.zeros((2, 3), np.float16), ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.activation.fwd(relu_desc(src), src, out=np.zeros((3, 2), np.float32), ctx=reference)


def test_read_only_output_is_refused(reference):
    src = np.zeros((2, 3), np.float32)
    out = np.zeros((2, 3), np.float32)
    out.flags.writeable = False
    with pytest.raises(TypeError):
        dnnx.activation.fwd(relu_desc(src), src, out=out, ctx=reference)


def test_empty_arrays(reference):
    src = np.zeros((0, 3), np.float32)
    desc = dnnx.ActivationDesc(kind="relu", dims=(0, 3))
    try:
        desc.validate()
    except dnnx.InvalidArgument:
        return  # dnnx refuses empty dims: then it must say so, not crash
    assert dnnx.activation.fwd(desc, src, ctx=reference).shape == (0, 3)
