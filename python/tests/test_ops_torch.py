"""Every op from Python against PyTorch (Debian's 1.13, CPU): forward results, and backward results
against the gradients autograd computes, on each host backend."""

import pytest

import dnnx

torch = pytest.importorskip("torch")
F = torch.nn.functional


def close(actual, expected, tol=1e-4):
    assert isinstance(actual, torch.Tensor)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual.float(), expected.detach().float(), rtol=tol, atol=tol)


def randn(*shape, channels_last=False, generator_seed=0):
    tensor = torch.randn(*shape)
    if channels_last:
        tensor = tensor.contiguous(memory_format=torch.channels_last)
    return tensor.requires_grad_()


@pytest.mark.parametrize("channels_last", [False, True])
def test_conv2d(ctx, channels_last):
    torch.manual_seed(1)
    src = randn(2, 4, 9, 8, channels_last=channels_last)
    weights = randn(6, 2, 3, 3, channels_last=channels_last)
    bias = torch.randn(6, requires_grad=True)
    desc = dnnx.conv.desc_for(src, weights, stride=2, padding=1, dilation=1, groups=2)
    assert desc.layout == ("nhwc" if channels_last else "nchw")
    expected = F.conv2d(src, weights, bias, stride=2, padding=1, groups=2)
    dst = dnnx.conv.fwd(desc, src, weights, bias, ctx=ctx)
    close(dst, expected)
    if channels_last:
        assert dst.is_contiguous(memory_format=torch.channels_last)

    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    diff_src = dnnx.conv.bwd_data(desc, diff_dst.contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format),
        weights, ctx=ctx)
    close(diff_src, src.grad)
    diff_dst_laid = diff_dst.contiguous(
        memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    diff_weights, diff_bias = dnnx.conv.bwd_weights(desc, src, diff_dst_laid, bias=True, ctx=ctx)
    close(diff_weights, weights.grad, 1e-3)
    close(diff_bias, bias.grad, 1e-3)
    close(dnnx.conv.bias_bwd(desc, diff_dst_laid, ctx=ctx), bias.grad, 1e-3)


def test_conv_bias_fwd_in_place(ctx):
    src, weights = torch.randn(1, 3, 5, 5), torch.randn(4, 3, 3, 3)
    bias = torch.randn(4)
    desc = dnnx.conv.desc_for(src, weights, padding=1)
    dst = dnnx.conv.fwd(desc, src, weights, ctx=ctx)
    returned = dnnx.conv.bias_fwd(desc, bias, dst, ctx=ctx)
    assert returned is dst
    close(dst, F.conv2d(src, weights, bias, padding=1))


def test_conv1d_and_conv3d_dilated(ctx):
    src, weights = torch.randn(2, 3, 11), torch.randn(5, 3, 3)
    desc = dnnx.conv.desc_for(src, weights, stride=1, padding=2, dilation=2)
    close(dnnx.conv.fwd(desc, src, weights, ctx=ctx), F.conv1d(src, weights, padding=2, dilation=2))
    src, weights = torch.randn(1, 2, 4, 5, 6), torch.randn(3, 2, 2, 2, 2)
    desc = dnnx.conv.desc_for(src, weights, stride=(1, 2, 1), padding=(1, 0, 1))
    close(dnnx.conv.fwd(desc, src, weights, ctx=ctx),
          F.conv3d(src, weights, stride=(1, 2, 1), padding=(1, 0, 1)))


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-2), (torch.bfloat16, 5e-2)])
def test_conv_half_types(ctx, dtype, tol):
    src, weights = torch.randn(1, 4, 6, 6), torch.randn(4, 4, 3, 3)
    expected = F.conv2d(src.to(dtype).float(), weights.to(dtype).float(), padding=1)
    desc = dnnx.conv.desc_for(src.to(dtype), weights.to(dtype), padding=1)
    assert desc.dtype == {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    dst = dnnx.conv.fwd(desc, src.to(dtype), weights.to(dtype), ctx=ctx)
    assert dst.dtype == dtype
    close(dst, expected, tol)


def test_conv_fused(ctx):
    src, weights, bias = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3), torch.randn(4)
    residual = torch.randn(2, 4, 6, 6)
    desc = dnnx.conv_fused.desc_for(src, weights, padding=1, bias=True, residual=True,
                                    residual_scale=0.5, activation="relu")
    dst = dnnx.conv_fused.fwd(desc, src, weights, bias, residual, ctx=ctx)
    close(dst, F.relu(F.conv2d(src, weights, bias, padding=1) + 0.5 * residual))


@pytest.mark.parametrize("mode", ["max", "avg_include_pad", "avg_exclude_pad"])
def test_pool2d(ctx, mode):
    torch.manual_seed(2)
    src = randn(2, 3, 9, 9)
    desc = dnnx.pool.desc_for(src, kernel=3, stride=2, padding=1, mode=mode)
    if mode == "max":
        expected = F.max_pool2d(src, 3, 2, 1)
    else:
        expected = F.avg_pool2d(src, 3, 2, 1, count_include_pad=mode == "avg_include_pad")
    dst = dnnx.pool.fwd(desc, src, ctx=ctx)
    close(dst, expected)
    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    close(dnnx.pool.bwd(desc, diff_dst, src, dst, ctx=ctx), src.grad)


def test_max_pool_with_indices(ctx):
    src = randn(1, 2, 7, 7, channels_last=False)
    expected, expected_indices = F.max_pool2d(src, 2, 2, 0, ceil_mode=True, return_indices=True)
    desc = dnnx.pool.desc_for(src, kernel=2, ceil_mode=True, indices=True)
    dst, indices = dnnx.pool.fwd(desc, src, ctx=ctx)
    close(dst, expected)
    assert indices.dtype == torch.int64
    assert torch.equal(indices, expected_indices)
    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    close(dnnx.pool.bwd(desc, diff_dst, indices=indices, ctx=ctx), src.grad)


ACTIVATIONS = [
    ("relu", {}, F.relu),
    ("tanh", {}, torch.tanh),
    ("sigmoid", {}, torch.sigmoid),
    ("elu", {"alpha": 0.7}, lambda x: F.elu(x, 0.7)),
    ("swish", {}, F.silu),
    ("clipped_relu", {"ceiling": 1.5}, lambda x: F.hardtanh(x, 0.0, 1.5)),
    ("identity", {}, lambda x: x * 1),
]


@pytest.mark.parametrize("kind,options,reference_fn", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation(ctx, kind, options, reference_fn):
    torch.manual_seed(3)
    src = randn(2, 3, 4, 5) * 2
    src.retain_grad()
    desc = dnnx.activation.desc_for(src, kind, **options)
    expected = reference_fn(src)
    dst = dnnx.activation.fwd(desc, src, ctx=ctx)
    close(dst, expected)
    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    close(dnnx.activation.bwd(desc, diff_dst, src.detach(), dst, ctx=ctx), src.grad)


@pytest.mark.parametrize("log", [False, True])
def test_softmax_channel(ctx, log):
    src = randn(2, 5, 3, 2)
    desc = dnnx.softmax.desc_for(src, mode="channel", log=log)
    expected = (F.log_softmax if log else F.softmax)(src, dim=1)
    dst = dnnx.softmax.fwd(desc, src, ctx=ctx)
    close(dst, expected)
    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    close(dnnx.softmax.bwd(desc, dst, diff_dst, ctx=ctx), src.grad)


def test_softmax_instance(ctx):
    src = torch.randn(3, 4, 2)
    desc = dnnx.softmax.desc_for(src, mode="instance")
    close(dnnx.softmax.fwd(desc, src, ctx=ctx), F.softmax(src.reshape(3, -1), 1).reshape(3, 4, 2))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(ctx, reduction):
    torch.manual_seed(4)
    logits = randn(6, 5)
    labels = torch.tensor([0, 4, -100, 2, 2, 1])
    weights = torch.rand(5) + 0.5
    expected = F.cross_entropy(logits, labels, weight=weights, ignore_index=-100,
                               reduction=reduction)
    desc = dnnx.cross_entropy.desc_for(logits, labels, reduction, -100, weights)
    loss = dnnx.cross_entropy.fwd(desc, logits, labels, weights, ctx=ctx)
    close(loss.reshape(expected.shape), expected)
    diff_loss = torch.randn_like(expected)
    expected.backward(diff_loss)
    diff_logits = dnnx.cross_entropy.bwd(desc, logits, labels, diff_loss.reshape(loss.shape),
                                         weights, ctx=ctx)
    close(diff_logits, logits.grad)


def test_cross_entropy_spatial_int32_labels(ctx):
    logits = torch.randn(2, 4, 3, 3)
    labels = torch.randint(0, 4, (2, 3, 3), dtype=torch.int32)
    desc = dnnx.cross_entropy.desc_for(logits, labels, "mean")
    assert desc.label_dtype == "i32"
    loss = dnnx.cross_entropy.fwd(desc, logits, labels, ctx=ctx)
    close(loss.reshape(()), F.cross_entropy(logits, labels.long()))


def test_batch_norm_training(ctx):
    torch.manual_seed(5)
    src = randn(4, 3, 5, 5)
    scale, shift = torch.rand(3, requires_grad=True), torch.randn(3, requires_grad=True)
    running_mean, running_var = torch.randn(3), torch.rand(3) + 0.5
    torch_mean, torch_var = running_mean.clone(), running_var.clone()
    expected = F.batch_norm(src, torch_mean, torch_var, scale, shift, training=True, momentum=0.1,
                            eps=1e-5)
    desc = dnnx.batch_norm.desc_for(src, training=True, eps=1e-5, momentum=0.1)
    dst, saved_mean, saved_inv_std = dnnx.batch_norm.fwd(desc, src, scale, shift, running_mean,
                                                         running_var, ctx=ctx)
    close(dst, expected)
    close(running_mean, torch_mean)
    close(running_var, torch_var)
    close(saved_mean, src.mean(dim=(0, 2, 3)))
    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    diff_src, diff_scale, diff_shift = dnnx.batch_norm.bwd(desc, src, diff_dst, scale, saved_mean,
                                                           saved_inv_std, ctx=ctx)
    close(diff_src, src.grad, 1e-3)
    close(diff_scale, scale.grad, 1e-3)
    close(diff_shift, shift.grad, 1e-3)


def test_batch_norm_inference(ctx):
    src = torch.randn(2, 3, 4, 4)
    scale, shift = torch.rand(3), torch.randn(3)
    mean, var = torch.randn(3), torch.rand(3) + 0.5
    desc = dnnx.batch_norm.desc_for(src, training=False)
    dst = dnnx.batch_norm.fwd(desc, src, scale, shift, mean, var, ctx=ctx)
    close(dst, F.batch_norm(src, mean, var, scale, shift, training=False))


def test_add_broadcast(ctx):
    src, dst = torch.randn(1, 3, 1, 1), torch.randn(2, 3, 4, 4)
    expected = 0.5 * src + 2.0 * dst
    desc = dnnx.add.desc_for(src, dst, alpha=0.5, beta=2.0)
    assert dnnx.add.fwd(desc, src, dst, ctx=ctx) is dst
    close(dst, expected)
    diff_dst = torch.randn(2, 3, 4, 4)
    close(dnnx.add.bwd(desc, diff_dst, ctx=ctx), 0.5 * diff_dst.sum(dim=(0, 2, 3), keepdim=True))


def test_linear(ctx):
    torch.manual_seed(6)
    src, weight, bias = randn(5, 7), randn(4, 7), torch.randn(4, requires_grad=True)
    expected = F.linear(src, weight, bias)
    desc = dnnx.matmul.linear_desc(src, weight, bias)
    close(dnnx.matmul.fwd(desc, src, weight, bias, ctx=ctx), expected)
    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    close(dnnx.matmul.bwd_data(desc, diff_dst, weight, ctx=ctx), src.grad)
    diff_weight, diff_bias = dnnx.matmul.bwd_weights(desc, src, diff_dst, ctx=ctx)
    close(diff_weight, weight.grad)
    close(diff_bias, bias.grad)


@pytest.mark.parametrize("activation", ["relu", "gelu_tanh"])
def test_linear_with_activation(ctx, activation):
    torch.manual_seed(16)
    src, weight, bias = randn(6, 9), randn(8, 9), torch.randn(8, requires_grad=True)
    act = torch.relu if activation == "relu" else (lambda x: F.gelu(x, approximate="tanh"))
    expected = act(F.linear(src, weight, bias))
    desc = dnnx.matmul.linear_desc(src, weight, bias, activation=activation)
    assert desc.activation == activation
    close(dnnx.matmul.fwd(desc, src, weight, bias, ctx=ctx), expected)
    dst, state = dnnx.matmul.fwd_training(desc, src, weight, bias, ctx=ctx)
    close(dst, expected)
    assert isinstance(state, dnnx.SavedState) and not state.empty and state.op == "matmul"
    diff_dst = torch.randn_like(expected)
    expected.backward(diff_dst)
    close(dnnx.matmul.bwd_data(desc, diff_dst, weight, state=state, ctx=ctx), src.grad)
    diff_weight, diff_bias = dnnx.matmul.bwd_weights(desc, src, diff_dst, state=state, ctx=ctx)
    close(diff_weight, weight.grad)
    close(diff_bias, bias.grad)
    with pytest.raises(dnnx.InvalidArgument):  # a backward through an activation needs the state
        dnnx.matmul.bwd_data(desc, diff_dst, weight, ctx=ctx)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.matmul.linear_desc(src, weight, bias, activation="swish")


def test_batched_matmul_and_beta(ctx):
    a, b = torch.randn(3, 4, 5), torch.randn(3, 6, 5)
    desc = dnnx.matmul.desc_for(a, b, transpose_b=True, alpha=2.0)
    close(dnnx.matmul.fwd(desc, a, b, ctx=ctx), 2.0 * a @ b.transpose(1, 2))
    shared = torch.randn(5, 2)
    out = torch.ones(3, 4, 2)
    desc = dnnx.matmul.desc_for(a, shared, beta=1.0)
    assert desc.broadcast_b
    assert dnnx.matmul.fwd(desc, a, shared, out=out, ctx=ctx) is out
    close(out, a @ shared + 1)


def test_matmul_with_a_shared_by_the_batch(ctx):
    # torch.matmul of a matrix and a batch: the matrix serves every product, and its gradient
    # sums over the batch.
    w = torch.randn(4, 5, requires_grad=True)
    x = torch.randn(3, 5, 6, requires_grad=True)
    desc = dnnx.matmul.desc_for(w, x)
    assert desc.broadcast_a and not desc.broadcast_b and desc.batch == 3
    assert tuple(desc.a_dims()) == (4, 5)
    y = torch.matmul(w, x)
    close(dnnx.matmul.fwd(desc, w, x, ctx=ctx), y)
    dy = torch.randn_like(y)
    y.backward(dy)
    close(dnnx.matmul.bwd_data(desc, dy, x, ctx=ctx), w.grad)
    close(dnnx.matmul.bwd_weights(desc, w, dy, ctx=ctx), x.grad)
    transposed = dnnx.matmul.desc_for(w.detach().t().contiguous(), x, transpose_a=True)
    assert transposed.broadcast_a
    close(dnnx.matmul.bwd_data(transposed, dy, x, ctx=ctx), w.grad.t())
    with pytest.raises(dnnx.InvalidArgument):  # batches that differ
        dnnx.matmul.desc_for(torch.randn(2, 4, 5), x)
    with pytest.raises(dnnx.InvalidArgument):  # both shared: batch 1 says it
        dnnx.MatmulDesc(batch=3, m=4, n=6, k=5, broadcast_a=True, broadcast_b=True).validate()
