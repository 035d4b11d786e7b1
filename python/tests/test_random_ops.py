"""fill, dnnx.init and dropout through Python: the Generator, in-place zero-copy fills, the
distributions' statistics and bounds (torch.nn.init's formulas), dropout against F.dropout's
semantics, and bad arguments."""

import math

import numpy as np
import pytest

import dnnx

torch = pytest.importorskip("torch")
F = torch.nn.functional


def test_generator_state():
    g = dnnx.Generator(7)
    assert (g.seed, g.offset) == (7, 0)
    assert dnnx.Generator() == dnnx.Generator(dnnx.Generator.default_seed)
    g.offset = 5
    assert g == dnnx.Generator(7, 5) and repr(g) == "Generator(seed=7, offset=5)"
    g.manual_seed(9)
    assert (g.seed, g.offset) == (9, 0)
    assert dnnx.manual_seed(3) is dnnx.default_generator and dnnx.default_generator.offset == 0
    with pytest.raises(TypeError):
        dnnx.Generator(-1)


def test_fill_in_place_and_reproducible(ctx):
    x = np.zeros((3, 5, 7), dtype=np.float32)
    address = dnnx.data_ptr(x)
    g = dnnx.Generator(11)
    assert dnnx.fill.uniform(x, -2.0, 3.0, generator=g, ctx=ctx) is x
    assert dnnx.data_ptr(x) == address
    assert g.offset == math.ceil(x.size / 4)
    assert x.min() >= -2.0 and x.max() < 3.0 and len(np.unique(x)) > x.size // 2
    # The same generator state draws the same bits on every backend; the next call differs.
    again = np.empty_like(x)
    dnnx.fill.uniform(again, -2.0, 3.0, generator=dnnx.Generator(11), ctx=dnnx.Context("reference"))
    np.testing.assert_array_equal(x, again)
    dnnx.fill.uniform(again, -2.0, 3.0, generator=g, ctx=ctx)
    assert not np.array_equal(x, again)
    dnnx.fill.constant(x, 1.5, ctx=ctx)
    assert (x == 1.5).all() and g.offset == 2 * math.ceil(x.size / 4)


def test_fill_statistics(ctx):
    t = torch.empty(256, 256)
    dnnx.fill.normal(t, 1.0, 2.0, generator=dnnx.Generator(1), ctx=ctx)
    assert abs(t.mean().item() - 1.0) < 0.03 and abs(t.std().item() - 2.0) < 0.03
    dnnx.fill.trunc_normal(t, 0.0, 1.0, -0.5, 1.0, generator=dnnx.Generator(2), ctx=ctx)
    assert t.min().item() >= -0.5 and t.max().item() <= 1.0
    desc = dnnx.fill.desc_for(t, "normal")
    assert desc.dims == (256, 256) and desc.distribution == "normal"
    assert [row.id for row in dnnx.algos(desc, ctx=ctx)]


@pytest.mark.parametrize("nonlinearity,param", [("linear", None), ("relu", None), ("tanh", None),
                                                ("leaky_relu", 0.2), ("selu", None),
                                                ("conv2d", None), ("sigmoid", None)])
def test_calculate_gain_matches_torch(nonlinearity, param):
    assert dnnx.init.calculate_gain(nonlinearity, param) == pytest.approx(
        torch.nn.init.calculate_gain(nonlinearity, param), rel=1e-12)


def test_init_bounds_match_torch(ctx):
    weight = torch.nn.Parameter(torch.zeros(64, 16, 3, 3))
    address = weight.data_ptr()
    g = dnnx.Generator(5)
    # nn.Conv2d's reset_parameters: kaiming_uniform_(a=sqrt(5)).
    assert dnnx.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=g, ctx=ctx) is weight
    assert weight.data_ptr() == address and weight.requires_grad
    fan_in = 16 * 9
    bound = torch.nn.init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3 / fan_in)
    assert weight.abs().max().item() <= bound and weight.abs().max().item() > 0.95 * bound
    assert dnnx.init.calculate_fan_in_and_fan_out(weight) == \
        torch.nn.init._calculate_fan_in_and_fan_out(weight)
    dnnx.init.kaiming_normal_(weight, mode="fan_out", nonlinearity="relu", generator=g, ctx=ctx)
    assert weight.std().item() == pytest.approx(math.sqrt(2 / (64 * 9)), rel=0.05)
    linear = torch.empty(300, 200)
    dnnx.init.xavier_uniform_(linear, gain=2.0, generator=g, ctx=ctx)
    bound = 2.0 * math.sqrt(6 / 500)
    assert linear.abs().max().item() <= bound and linear.abs().max().item() > 0.95 * bound
    dnnx.init.xavier_normal_(linear, generator=g, ctx=ctx)
    assert linear.std().item() == pytest.approx(math.sqrt(2 / 500), rel=0.05)
    dnnx.init.uniform_(linear, -0.1, 0.1, generator=g, ctx=ctx)
    assert linear.abs().max().item() <= 0.1
    dnnx.init.trunc_normal_(linear, std=0.02, a=-0.04, b=0.04, generator=g, ctx=ctx)
    assert linear.abs().max().item() <= 0.04
    dnnx.init.normal_(linear, 3.0, 0.5, generator=g, ctx=ctx)
    assert linear.mean().item() == pytest.approx(3.0, abs=0.01)
    dnnx.init.zeros_(linear, ctx=ctx)
    assert (linear == 0).all()
    dnnx.init.ones_(linear, ctx=ctx)
    assert (linear == 1).all()
    dnnx.init.constant_(linear, -4.0, ctx=ctx)
    assert (linear == -4).all()
    half = torch.empty(32, 8, dtype=torch.bfloat16)
    dnnx.init.kaiming_uniform_(half, generator=g, ctx=ctx)
    assert half.float().abs().max().item() <= math.sqrt(2) * math.sqrt(3 / 8) * 1.01


def test_init_bad_arguments(reference):
    t = torch.empty(4, 4)
    with pytest.raises(dnnx.InvalidArgument, match="fan_sideways"):
        dnnx.init.kaiming_uniform_(t, mode="fan_sideways", ctx=reference)
    with pytest.raises(ValueError, match="swish"):
        dnnx.init.kaiming_normal_(t, nonlinearity="swish", ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.init.xavier_uniform_(torch.empty(5), ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.init.uniform_(t, 1.0, -1.0, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.init.normal_(t, 0.0, -1.0, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="float64"):
        dnnx.init.uniform_(torch.empty(4, dtype=torch.float64), ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.init.uniform_(torch.empty(4, 6)[:, ::2], ctx=reference)
    with pytest.raises(TypeError):
        dnnx.init.uniform_(t, generator=42, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.fill.fwd(dnnx.FillDesc(dims=(3, 3), distribution="uniform"), t, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="gamma"):
        dnnx.FillDesc(distribution="gamma")


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_training_semantics(ctx, p):
    x = torch.randn(64, 1024)
    desc = dnnx.dropout.desc_for(x, p)
    g = dnnx.Generator(123)
    y, state = dnnx.dropout.fwd_training(desc, x, generator=g, ctx=ctx)
    assert isinstance(state, dnnx.SavedState) and not state.empty and state.op == "dropout"
    assert g.offset == math.ceil(x.numel() / 4)
    kept = y != 0
    assert abs(1 - kept.float().mean().item() - p) < 0.01
    # Kept elements are scaled by 1 / (1 - p) in f32, F.dropout's factor.
    scale = desc.scale()
    torch_scale = F.dropout(torch.ones(4096), p, training=True).max().item()
    assert scale == pytest.approx(torch_scale, rel=1e-7)
    torch.testing.assert_close(y[kept], x[kept] * scale, rtol=0, atol=0)
    dy = torch.randn_like(x)
    dx = dnnx.dropout.bwd(desc, dy, state, ctx=ctx)
    torch.testing.assert_close(dx, torch.where(kept, dy * scale, torch.zeros_like(dy)),
                               rtol=0, atol=0)
    # The same generator state draws the same mask, a later one another.
    y2, _ = dnnx.dropout.fwd_training(desc, x, generator=dnnx.Generator(123), ctx=ctx)
    assert torch.equal(y, y2)
    y3, _ = dnnx.dropout.fwd_training(desc, x, generator=g, ctx=ctx)
    assert not torch.equal(y, y3)


def test_dropout_edges(ctx):
    x = torch.randn(8, 33)
    x[0, 0] = float("nan")
    assert torch.equal(dnnx.dropout.fwd(dnnx.dropout.desc_for(x, 0.5), x, ctx=ctx).nan_to_num(),
                       x.nan_to_num())
    y, _ = dnnx.dropout.fwd_training(dnnx.dropout.desc_for(x, 0.0), x, ctx=ctx)
    assert torch.equal(y.nan_to_num(), x.nan_to_num())
    y, _ = dnnx.dropout.fwd_training(dnnx.dropout.desc_for(x, 1.0), x, ctx=ctx)
    assert torch.isnan(y[0, 0]) and (y.nan_to_num() == 0).all()   # src * 0, as PyTorch


def test_dropout_bad_arguments(reference):
    x = torch.randn(4, 6)
    desc = dnnx.dropout.desc_for(x, 0.5)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.dropout.desc_for(x, 1.5).validate()
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.dropout.bwd(desc, x, dnnx.SavedState(), ctx=reference)
    _, state = dnnx.dropout.fwd_training(desc, x, ctx=reference)
    other = dnnx.dropout.desc_for(x, 0.25)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.dropout.bwd(other, x, state, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.dropout.fwd_training(desc, torch.randn(4, 7), ctx=reference)
    with pytest.raises(TypeError):
        dnnx.dropout.bwd(desc, x, "state", ctx=reference)


def test_torch_tensors_are_read_without_dlpack(reference):
    # Tensors that require grad, parameters and channels_last views are taken as they are.
    w = torch.nn.Parameter(torch.randn(4, 3, 2, 2).contiguous(memory_format=torch.channels_last))
    assert dnnx.data_ptr(w) == w.data_ptr() and dnnx.layout_of(w) == "nhwc"
    view = torch.randn(10, 8)[2:]
    assert dnnx.data_ptr(view) == view.data_ptr()
    with pytest.raises(dnnx.InvalidArgument, match="float64"):
        dnnx.data_ptr(torch.ones(3, dtype=torch.float64, requires_grad=True))
    with pytest.raises(dnnx.InvalidArgument, match="sparse"):
        dnnx.data_ptr(torch.ones(3, 3).to_sparse())
    with pytest.raises(dnnx.InvalidArgument, match="meta"):
        dnnx.data_ptr(torch.ones(3, device="meta"))
    with pytest.raises(dnnx.InvalidArgument, match="negative bit"):
        dnnx.data_ptr(torch._neg_view(torch.ones(3)))
    with pytest.raises(dnnx.InvalidArgument, match="rank 6"):
        dnnx.data_ptr(torch.ones(1, 1, 1, 1, 1, 1))
