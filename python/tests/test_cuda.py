"""CUDA: zero copy of CUDA tensors, results on the input's device, and ops queued on PyTorch's
current stream (a side stream here), through the functional API and dnnx.torch. Skipped where
PyTorch has no usable CUDA device or dnnx has no cudnn backend (Debian's CPU PyTorch)."""

import pytest

import dnnx

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and dnnx.backend_available("cudnn")[0]),
    reason="needs a CUDA build of PyTorch with a usable GPU and dnnx's cudnn backend")


def test_cuda_tensors_are_not_copied():
    src = torch.randn(2, 3, 8, 8, device="cuda")
    assert dnnx.data_ptr(src) == src.data_ptr()
    ctx = dnnx.Context("cudnn").with_stream(torch.cuda.current_stream())
    weights = torch.randn(4, 3, 3, 3, device="cuda")
    desc = dnnx.conv.desc_for(src, weights, padding=1)
    out = torch.empty(2, 4, 8, 8, device="cuda")
    assert dnnx.conv.fwd(desc, src, weights, out=out, ctx=ctx) is out
    dst = dnnx.conv.fwd(desc, src, weights, ctx=ctx)
    assert dst.device == src.device
    torch.testing.assert_close(dst, F.conv2d(src, weights, padding=1), rtol=1e-3, atol=1e-3)


def test_ops_on_a_side_stream_need_no_synchronisation():
    import dnnx.torch as dt
    side = torch.cuda.Stream()
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                                torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(16 * 32 * 32, 10)).cuda()
    converted = dt.convert(__import__("copy").deepcopy(model))
    x = torch.randn(8, 3, 32, 32, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # Large enough that a missing stream dependency would read unfinished data.
        for _ in range(3):
            out = converted(x)
            out.square().sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    expected = model(x)
    for _ in range(3):
        model(x).square().sum().backward()
    torch.testing.assert_close(out, expected, rtol=2e-3, atol=2e-3)
    for mine, reference in zip(converted.parameters(), model.parameters()):
        torch.testing.assert_close(mine.grad, reference.grad, rtol=5e-3, atol=5e-3)


def test_plain_cudnn_context_follows_torch_current_stream():
    ctx = dnnx.Context("cudnn")
    x = torch.randn(64, 64, 64, 64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        desc = dnnx.activation.desc_for(x, "relu")
        y = dnnx.activation.fwd(desc, x, ctx=ctx)  # queued on `side`, the current stream
        z = y * 2  # PyTorch reads it on the same stream: no synchronisation in between
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(z, torch.relu(x) * 2)
    assert ctx.stream == 0  # the caller's context is not changed
