"""dnnx.optim (SGD, Adam, AdamW) against torch.optim over a few steps, state_dict, param
groups; dnnx.amp.GradScaler's skipping and scale updates; the op-level calls and bad arguments."""

import copy

import pytest

import dnnx

torch = pytest.importorskip("torch")


def make_params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(16, 8, 3, 3), (16,), (10, 40), (10,), (1,)]
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
    # A channels_last weight: it and its gradient run as they lie in memory.
    params[0] = torch.nn.Parameter(params[0].detach().contiguous(memory_format=torch.channels_last))
    return params


def set_grads(params, step):
    gen = torch.Generator().manual_seed(1000 + step)
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).contiguous(
            memory_format=torch.channels_last if p.dim() == 4 else torch.contiguous_format)


def run_pair(make_ours, make_theirs, steps=5, groups=None):
    ours, theirs = make_params(), make_params()
    if groups:
        ours_arg = [dict(params=ours[:2], **groups[0]), dict(params=ours[2:], **groups[1])]
        theirs_arg = [dict(params=theirs[:2], **groups[0]), dict(params=theirs[2:], **groups[1])]
    else:
        ours_arg, theirs_arg = ours, theirs
    a, b = make_ours(ours_arg), make_theirs(theirs_arg)
    for step in range(steps):
        set_grads(ours, step)
        set_grads(theirs, step)
        a.step()
        b.step()
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-6, atol=1e-6)
    return a, b, ours, theirs


SGD_CASES = [dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, dampening=0.3,
                                                            weight_decay=1e-2),
             dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=1e-3),
             dict(lr=0.02, momentum=0.5, maximize=True)]


@pytest.mark.parametrize("options", SGD_CASES)
def test_sgd_matches_torch(ctx, options):
    a, b, ours, _ = run_pair(lambda p: dnnx.optim.SGD(p, ctx=ctx, **options),
                             lambda p: torch.optim.SGD(p, **options))
    if options.get("momentum"):
        torch.testing.assert_close(a.state[ours[2]]["momentum_buffer"],
                                   b.state[b.param_groups[0]["params"][2]]["momentum_buffer"],
                                   rtol=1e-6, atol=1e-6)


ADAM_CASES = [dict(), dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=1e-2),
              dict(lr=1e-2, amsgrad=True), dict(lr=1e-2, maximize=True)]


@pytest.mark.parametrize("options", ADAM_CASES)
@pytest.mark.parametrize("decoupled", [False, True])
def test_adam_matches_torch(ctx, options, decoupled):
    ours_class = dnnx.optim.AdamW if decoupled else dnnx.optim.Adam
    theirs_class = torch.optim.AdamW if decoupled else torch.optim.Adam
    a, b, ours, theirs = run_pair(lambda p: ours_class(p, ctx=ctx, **options),
                                  lambda p: theirs_class(p, **options))
    torch.testing.assert_close(a.state[ours[1]]["exp_avg_sq"], b.state[theirs[1]]["exp_avg_sq"],
                               rtol=1e-6, atol=1e-9)
    assert a.state[ours[1]]["step"].item() == 5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("make", [
    lambda p, ctx, master: dnnx.optim.SGD(p, lr=1e-3, momentum=0.9, master_weights=master, ctx=ctx),
    lambda p, ctx, master: dnnx.optim.AdamW(p, lr=1e-4, master_weights=master, ctx=ctx)],
    ids=["sgd", "adamw"])
def test_master_weights_follow_an_f32_run(ctx, dtype, make):
    """f16 / bf16 parameters stepped through f32 masters follow torch's f32 optimizer given the
    same gradients: the masters match it, the parameters are the masters rounded. Without masters
    the small updates are lost to rounding."""
    low = [torch.nn.Parameter(p.detach().to(dtype)) for p in make_params()]
    start = [p.detach().clone() for p in low]
    plain = [torch.nn.Parameter(p.detach().clone()) for p in low]
    full = [torch.nn.Parameter(p.detach().float()) for p in low]
    ours, without = make(low, ctx, True), make(plain, ctx, False)
    theirs = (torch.optim.SGD(full, lr=1e-3, momentum=0.9) if isinstance(ours, dnnx.optim.SGD)
              else torch.optim.AdamW(full, lr=1e-4))
    for step in range(10):
        set_grads(full, step)
        for p, q, f in zip(low, plain, full):
            f.grad = f.grad.to(dtype).float()
            p.grad = f.grad.to(dtype)
            q.grad = f.grad.to(dtype)
        ours.step()
        without.step()
        theirs.step()
    for p, f in zip(low, full):
        master = ours.state[p]["master"]
        assert master.dtype == torch.float32
        torch.testing.assert_close(master, f.detach(), rtol=1e-6, atol=1e-6)
        assert torch.equal(p.detach(), master.to(dtype))
    moved = sum((p.detach() != s).sum().item() for p, s in zip(low, start))
    moved_without = sum((q.detach() != s).sum().item() for q, s in zip(plain, start))
    assert moved > moved_without
    assert "master" in ours.state_dict()["state"][0]
    assert "master" not in without.state_dict()["state"][0]


def test_param_groups_and_state_dict(ctx):
    groups = [dict(lr=0.1), dict(lr=0.01, weight_decay=0.1)]
    a, b, ours, theirs = run_pair(lambda p: dnnx.optim.Adam(p, ctx=ctx),
                                  lambda p: torch.optim.Adam(p), steps=3, groups=groups)
    state = a.state_dict()
    assert set(state["state"]) == set(range(len(ours)))
    assert all(isinstance(v, torch.Tensor) for s in state["state"].values() for v in s.values())
    assert [g["lr"] for g in state["param_groups"]] == [0.1, 0.01]
    # A copy restored from the state dict continues on the same trajectory.
    clones = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    restored = dnnx.optim.Adam([dict(params=clones[:2]), dict(params=clones[2:])], ctx=ctx)
    restored.load_state_dict(copy.deepcopy(state))
    for step in range(3, 5):
        for params, opt in ((ours, a), (clones, restored), (theirs, b)):
            set_grads(params, step)
            opt.step()
    for p, q, r in zip(ours, clones, theirs):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=0, atol=0)
        torch.testing.assert_close(p.detach(), r.detach(), rtol=1e-6, atol=1e-6)


def test_parameters_without_grad_are_left_alone(ctx):
    params = make_params()
    before = params[1].detach().clone()
    opt = dnnx.optim.SGD(params, lr=0.1, ctx=ctx)
    set_grads(params, 0)
    params[1].grad = None
    opt.step()
    assert torch.equal(params[1].detach(), before) and params[1] not in opt.state
    opt.zero_grad()
    opt.step()   # no gradients at all: nothing runs


def test_grad_scaler_skips_and_updates(ctx):
    params = make_params()
    reference = [p.detach().clone() for p in params]
    opt = dnnx.optim.SGD(params, lr=0.1, momentum=0.9, ctx=ctx)
    scaler = dnnx.amp.GradScaler(init_scale=1024.0, growth_interval=2, ctx=ctx)
    loss = sum((p * p).sum() for p in params)
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(loss.item() * 1024, rel=1e-6)
    scaled.backward()
    scaler.unscale_(opt)
    for p, r in zip(params, reference):
        torch.testing.assert_close(p.grad, 2 * r, rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0
    stepped = [p.detach().clone() for p in params]
    assert not torch.equal(stepped[0], reference[0])
    # An inf gradient: the step is skipped on the device (parameters, buffers and the step
    # count unchanged) and the scale backs off.
    opt.zero_grad()
    scaler.scale(sum((p * p).sum() for p in params)).backward()
    params[2].grad[3, 4] = float("inf")
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0
    assert opt.state[params[0]]["step"].item() == 1
    for p, s in zip(params, stepped):
        assert torch.equal(p.detach(), s)
    # Two clean steps grow the scale (growth_interval=2).
    for _ in range(2):
        opt.zero_grad()
        scaler.scale(sum((p * p).sum() for p in params)).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 1024.0 and opt.state[params[0]]["step"].item() == 3
    state = scaler.state_dict()
    assert state["scale"] == 1024.0 and state["_growth_tracker"] == 0


def test_grad_scaler_with_a_torch_optimizer(ctx):
    params = make_params()
    opt = torch.optim.SGD(params, lr=0.1)
    scaler = dnnx.amp.GradScaler(init_scale=8.0, ctx=ctx)
    before = [p.detach().clone() for p in params]
    scaler.scale(sum(p.sum() for p in params)).backward()
    params[0].grad[0, 0, 0, 0] = float("nan")
    scaler.step(opt)
    scaler.update()
    assert all(torch.equal(p.detach(), b) for p, b in zip(params, before))
    assert scaler.get_scale() == 4.0


def test_op_level_calls(ctx):
    params = [torch.ones(3, 4), torch.ones(5)]
    grads = [torch.full((3, 4), 2.0), torch.full((5,), 4.0)]
    step = torch.zeros(1)
    desc = dnnx.optim.sgd_desc(params)
    assert desc.shapes == [(3, 4), (5,)] and desc.dtype == "f32"
    dnnx.optim.sgd(desc, params, grads, step, lr=0.5, ctx=ctx)
    assert (params[0] == 0).all() and (params[1] == -1).all() and step.item() == 1
    found, scale = torch.zeros(1), torch.tensor([2.0])
    dnnx.optim.unscale(dnnx.optim.unscale_desc(grads, from_scale=True), grads, found, scale,
                       ctx=ctx)
    assert (grads[0] == 1).all() and found.item() == 0
    tracker = torch.zeros(1, dtype=torch.int32)
    dnnx.optim.update_scale(scale, tracker, torch.ones(1), ctx=ctx)
    assert scale.item() == 1.0 and tracker.item() == 0
    assert [row.id for row in dnnx.algos(desc, ctx=ctx)]


def test_bad_arguments(reference):
    params = make_params()
    with pytest.raises(dnnx.InvalidArgument):
        opt = dnnx.optim.SGD(params, lr=-1.0, ctx=reference)
        set_grads(params, 0)
        opt.step()
    with pytest.raises(dnnx.InvalidArgument):
        opt = dnnx.optim.SGD(params, lr=0.1, nesterov=True, ctx=reference)
        opt.step()
    with pytest.raises(dnnx.InvalidArgument):
        opt = dnnx.optim.Adam(params, betas=(1.5, 0.9), ctx=reference)
        opt.step()
    p = torch.ones(3)
    with pytest.raises(dnnx.InvalidArgument):   # lists of different lengths
        dnnx.optim.sgd(dnnx.optim.sgd_desc([p]), [p], [], torch.zeros(1), lr=0.1, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="float64"):
        dnnx.optim.sgd(dnnx.optim.sgd_desc([p]), [p], [p.clone()],
                       torch.zeros(1, dtype=torch.float64), lr=0.1, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):   # a gradient of another shape
        dnnx.optim.sgd(dnnx.optim.sgd_desc([p]), [p], [torch.ones(4)], torch.zeros(1), lr=0.1,
                       ctx=reference)
    with pytest.raises(TypeError):
        dnnx.optim.sgd(dnnx.optim.sgd_desc([p]), [p], [None], torch.zeros(1), lr=0.1,
                       ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.SgdDesc(shapes=[(2, 3)], dtype="i32").validate()
