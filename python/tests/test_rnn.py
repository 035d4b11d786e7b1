"""The rnn op from Python (dnnx.rnn) and the dnnx.torch drop-ins for nn.RNN / LSTM / GRU, against
PyTorch's modules (Debian's 1.13, CPU) with the same weights: outputs, final states and every
gradient; PackedSequence inputs; dropout between layers; bad inputs. Runs on every host backend
that implements the op (the reference always)."""

import copy

import pytest

import dnnx

torch = pytest.importorskip("torch")
dt = pytest.importorskip("dnnx.torch")
nn = torch.nn
pack = nn.utils.rnn.pack_padded_sequence
unpack = nn.utils.rnn.pad_packed_sequence

TORCH = {"rnn_tanh": nn.RNN, "rnn_relu": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


def _has_rnn(name):
    desc = dnnx.RnnDesc(cell="gru", seq_length=2, batch=1, input_size=2, hidden_size=2)
    try:
        dnnx.algos(desc, "fwd", ctx=dnnx.Context(name))
    except dnnx.Unsupported:
        return False
    return True


RNN_BACKENDS = [name for name in ("reference", "cpu")
                if dnnx.backend_available(name)[0] and _has_rnn(name)]


@pytest.fixture(params=RNN_BACKENDS)
def rctx(request):
    """A context per host backend that implements the rnn op."""
    return dnnx.Context(request.param)


def close(actual, expected, tol=1e-4):
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual.float(), expected.detach().float(), rtol=tol, atol=tol)


def torch_module(cell, input_size, hidden, layers=1, bidirectional=False, batch_first=False,
                 bias=True, dropout=0.0):
    extra = {"nonlinearity": cell[4:]} if cell.startswith("rnn_") else {}
    return TORCH[cell](input_size, hidden, num_layers=layers, bias=bias,
                       batch_first=batch_first, dropout=dropout, bidirectional=bidirectional,
                       **extra)


def flat(module):
    return torch.cat([w.detach().reshape(-1) for w in module._flat_weights]).contiguous()


CASES = [  # cell, layers, bidirectional, batch_first, bias, variable lengths
    ("lstm", 2, True, False, True, True),
    ("gru", 2, False, True, True, False),
    ("rnn_tanh", 1, True, False, False, True),
    ("rnn_relu", 2, False, False, True, False),
]


@pytest.mark.parametrize("cell,layers,bidirectional,batch_first,bias,variable", CASES)
def test_op_against_torch(rctx, cell, layers, bidirectional, batch_first, bias, variable):
    torch.manual_seed(3)
    T, N, C, H = 5, 3, 4, 6
    module = torch_module(cell, C, H, layers, bidirectional, batch_first, bias)
    D = 2 if bidirectional else 1
    x = torch.randn((N, T, C) if batch_first else (T, N, C), requires_grad=True)
    h0 = torch.randn(layers * D, N, H, requires_grad=True)
    c0 = torch.randn(layers * D, N, H, requires_grad=True) if cell == "lstm" else None
    lengths = torch.tensor([5, 2, 4]) if variable else None
    desc = dnnx.rnn.desc_for(x, H, cell, layers, bias, batch_first, 0.0, bidirectional, lengths)
    assert desc.src_dims() == tuple(x.shape)
    assert desc.weights_count() == sum(w.numel() for w in module._flat_weights)
    offset = 0
    for layer in range(layers):
        for direction in range(D):
            for which in ("w_ih", "w_hh") + (("b_ih", "b_hh") if bias else ()):
                assert desc.weight_offset(layer, direction, which) == offset
                offset += torch.Size(desc.weight_dims(layer, direction, which)).numel()

    hx = h0 if c0 is None else (h0, c0)
    if variable:
        out, state = module(pack(x, lengths, batch_first=batch_first, enforce_sorted=False), hx)
        out, _ = unpack(out, batch_first=batch_first, total_length=T)
    else:
        out, state = module(x, hx)
    hy_ref, cy_ref = state if c0 is not None else (state, None)
    weights = flat(module)

    dst, hy, cy = dnnx.rnn.fwd(desc, x, weights, h0, c0, lengths, ctx=rctx)
    close(dst, out)
    close(hy, hy_ref)
    if c0 is not None:
        close(cy, cy_ref)
    else:
        assert cy is None

    dst, hy, cy, saved = dnnx.rnn.fwd_training(desc, x, weights, h0, c0, lengths, ctx=rctx)
    assert not saved.empty and saved.op == "rnn"
    close(dst, out)
    diff_dst, diff_hy = torch.randn(out.shape), torch.randn(hy_ref.shape)
    diff_cy = torch.randn(cy_ref.shape) if c0 is not None else None
    if variable:  # torch's padded output is 0 past each end: its gradient there is ignored
        for n, length in enumerate(lengths.tolist()):
            (diff_dst[n, length:] if batch_first else diff_dst[length:, n]).zero_()
    outputs = [out, hy_ref] + ([cy_ref] if c0 is not None else [])
    grads = [diff_dst, diff_hy] + ([diff_cy] if c0 is not None else [])
    inputs = [x, h0] + ([c0] if c0 is not None else []) + list(module._flat_weights)
    expected = torch.autograd.grad(outputs, inputs, grads)
    diff_src, diff_hx, diff_cx = dnnx.rnn.bwd_data(desc, x, weights, dst, diff_dst, saved, h0,
                                                   c0, lengths, diff_hy, diff_cy, ctx=rctx)
    close(diff_src, expected[0])
    close(diff_hx, expected[1])
    if c0 is not None:
        close(diff_cx, expected[2])
    diff_weights = dnnx.rnn.bwd_weights(desc, x, weights, dst, saved, h0, c0, lengths, ctx=rctx)
    close(diff_weights, torch.cat([g.reshape(-1) for g in expected[len(outputs):]]), 1e-3)
    # accumulate=True adds into out=.
    again = dnnx.rnn.bwd_weights(desc, x, weights, dst, saved, h0, c0, lengths,
                                 out=diff_weights.clone(), accumulate=True, ctx=rctx)
    close(again, 2 * diff_weights, 1e-3)


def test_desc_algos_select_profile(rctx):
    desc = dnnx.RnnDesc(cell="lstm", seq_length=3, batch=2, input_size=4, hidden_size=5,
                        layers=2, bidirectional=True)
    assert "lstm" in repr(desc)
    assert desc == desc.copy() and hash(desc) == hash(desc.copy())
    assert desc.state_dims() == (4, 2, 5) and desc.dst_dims() == (3, 2, 10)
    assert desc.gates() == 4 and desc.directions() == 2 and desc.layer_input_size(1) == 10
    assert desc.repro("fwd_training").startswith("dnnx profile rnn --cell lstm")
    assert "cell" in dnnx.RnnDesc.fields()
    for direction in ("fwd", "fwd_training", "bwd_data", "bwd_weights"):
        rows = dnnx.algos(desc, direction, ctx=rctx)
        assert rows and all(row.status in ("supported", "unsupported") for row in rows)
        supported = [row.id for row in rows if row.status == "supported"]
        assert supported
        assert dnnx.select(desc, direction, ctx=rctx).id in supported
    result = dnnx.profile(desc, "fwd", ctx=rctx)
    assert result.chosen in [row.id for row in result if row.status == "ok"]


def test_bad_inputs_raise_dnnx_errors(reference):
    x = torch.randn(4, 2, 3)
    desc = dnnx.rnn.desc_for(x, 5, "gru")
    weights = torch.randn(desc.weights_count())
    with pytest.raises(dnnx.InvalidArgument, match="hidden_size"):
        dnnx.RnnDesc(hidden_size=0).validate()
    with pytest.raises(dnnx.InvalidArgument, match="elman"):
        dnnx.RnnDesc(cell="elman")
    with pytest.raises(dnnx.InvalidArgument, match="no field 'hidden'"):
        dnnx.RnnDesc(hidden=3)
    with pytest.raises(dnnx.InvalidArgument, match="weights"):
        dnnx.rnn.fwd(desc, x, torch.randn(desc.weights_count() + 1), ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="src"):
        dnnx.rnn.fwd(desc, torch.randn(4, 2, 4), weights, ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.rnn.fwd(desc, x, weights, cx=torch.randn(1, 2, 5), ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="float64"):
        dnnx.rnn.fwd(desc, x.double(), weights, ctx=reference)
    varlen = dnnx.rnn.desc_for(x, 5, "gru", lengths=True)
    with pytest.raises(dnnx.InvalidArgument, match="lengths"):
        dnnx.rnn.fwd(varlen, x, weights, lengths=[4, 5], ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="lengths"):
        dnnx.rnn.fwd(varlen, x, weights, lengths=[1.5, 2.0], ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="weight"):
        desc.weight_offset(0, 0, "w_xx")
    with pytest.raises(dnnx.InvalidArgument, match="out="):
        dnnx.rnn.bwd_weights(desc, x, weights, x, dnnx.SavedState(), accumulate=True,
                             ctx=reference)
    # The backward reads the training forward's state: an empty one is refused by name.
    dst, _, _ = dnnx.rnn.fwd(desc, x, weights, ctx=reference)
    with pytest.raises(dnnx.Error):
        dnnx.rnn.bwd_data(desc, x, weights, dst, torch.randn_like(dst), dnnx.SavedState(),
                          ctx=reference)


# dnnx.torch drop-ins -----------------------------------------------------------------------


def _run(module, x, hx):
    out, state = module(x, hx)
    if isinstance(out, nn.utils.rnn.PackedSequence):
        out = unpack(out)[0]
    states = list(state) if isinstance(state, tuple) else [state]
    return [out] + states


@pytest.mark.parametrize("cell,layers,bidirectional,batch_first,packed", [
    ("lstm", 2, True, False, "unsorted"),
    ("gru", 1, True, True, None),
    ("rnn_tanh", 2, False, False, "sorted"),
    ("rnn_relu", 1, False, True, "unsorted"),
])
def test_converted_module_matches_torch(rctx, cell, layers, bidirectional, batch_first, packed):
    torch.manual_seed(5)
    T, N, C, H = 6, 4, 3, 5
    reference_module = torch_module(cell, C, H, layers, bidirectional, batch_first)
    module = dt.convert(copy.deepcopy(reference_module))
    assert type(module).__name__ == type(reference_module).__name__
    assert type(module) is not type(reference_module)
    assert list(module.state_dict()) == list(reference_module.state_dict())
    D = 2 if bidirectional else 1
    x = torch.randn((N, T, C) if batch_first else (T, N, C), requires_grad=True)
    h0 = torch.randn(layers * D, N, H, requires_grad=True)
    hx = (h0, torch.randn(layers * D, N, H, requires_grad=True)) if cell == "lstm" else h0
    leaves = [x] + (list(hx) if cell == "lstm" else [hx])
    def inputs():  # packed anew for each module: each backward frees its own graph
        if not packed:
            return x
        lengths = [6, 6, 4, 2] if packed == "sorted" else [3, 6, 2, 5]
        return pack(x, torch.tensor(lengths), batch_first=batch_first,
                    enforce_sorted=packed == "sorted")

    with rctx:
        got = _run(module, inputs(), hx)
    want = _run(reference_module, inputs(), hx)
    for mine, theirs in zip(got, want):
        close(mine, theirs)
    if packed:
        with rctx, torch.no_grad():
            packed_got = module(inputs(), hx)[0]
            packed_want = reference_module(inputs(), hx)[0]
        assert torch.equal(packed_got.batch_sizes, packed_want.batch_sizes)
        for mine, theirs in ((packed_got.sorted_indices, packed_want.sorted_indices),
                             (packed_got.unsorted_indices, packed_want.unsorted_indices)):
            assert mine is theirs is None or torch.equal(mine, theirs)
        close(packed_got.data, packed_want.data)
    seeds = [torch.randn_like(t) for t in want]
    mine = torch.autograd.grad(got, leaves + list(module.parameters()), seeds)
    theirs = torch.autograd.grad(want, leaves + list(reference_module.parameters()), seeds)
    for a, b in zip(mine, theirs):
        close(a, b, 1e-3)
    calls = module.__dict__["_dnnx_calls"]
    assert set(calls) >= {"fwd_training", "bwd_data", "bwd_weights"}
    with rctx, torch.no_grad():
        for a, b in zip(_run(module, inputs(), hx), want):
            close(a, b)
    assert "fwd" in module.__dict__["_dnnx_calls"]


def test_converted_unbatched_and_policies(reference):
    torch.manual_seed(6)
    lstm = nn.LSTM(3, 4)
    model = dt.convert(nn.Sequential(copy.deepcopy(lstm)))
    x = torch.randn(5, 3)
    with reference:
        out, (h, c) = model[0](x)
    want, (h_want, c_want) = lstm(x)
    close(out, want)
    close(h, h_want)
    close(c, c_want)
    algo = dt.algo(model[0])
    algo.fwd_training = "fixed:reference:direct"
    assert algo.fwd_training == "fixed:reference:direct"
    with reference:
        model[0](x.requires_grad_())[0].sum().backward()
    text = dt.report(model)
    assert "LSTM fwd_training: reference:direct" in text and "bwd_weights" in text
    assert "proj_size" in dt.why_not_converted(nn.LSTM(3, 4, proj_size=2))
    assert dt.why_not_converted(nn.GRU(3, 4)) is None


def test_converted_dropout_between_layers(rctx):
    """Training dropout between layers: the layers run one at a time with dnnx's dropout between
    them; the same masks (dnnx.dropout on the same generator state) applied between two torch
    layers give the same output and gradients."""
    torch.manual_seed(7)
    T, N, C, H, p = 4, 3, 2, 5, 0.4
    lstm = nn.LSTM(C, H, num_layers=2, dropout=p, bidirectional=True)
    module = dt.convert(copy.deepcopy(lstm))
    x = torch.randn(T, N, C, requires_grad=True)
    dnnx.manual_seed(11)
    with rctx:
        out, (h, c) = module(x)
    dnnx.manual_seed(11)
    ones = torch.ones(T, N, 2 * H)
    with rctx:
        mask, _ = dnnx.dropout.fwd_training(dnnx.dropout.desc_for(ones, p), ones)
    assert 0 < (mask == 0).sum() < mask.numel()
    first, second = nn.LSTM(C, H, bidirectional=True), nn.LSTM(2 * H, H, bidirectional=True)
    for name, value in lstm.named_parameters():
        target, local = (first, name) if "_l0" in name else (second, name.replace("_l1", "_l0"))
        getattr(target, local).data.copy_(value.data)
    mid, (h1, c1) = first(x)
    want, (h2, c2) = second(mid * mask)
    close(out, want)
    close(h, torch.cat([h1, h2]))
    close(c, torch.cat([c1, c2]))
    seed = torch.randn_like(want)
    mine = torch.autograd.grad(out, [x] + list(module.parameters()), seed)
    theirs = torch.autograd.grad(want, [x] + list(first.parameters()) + list(second.parameters()),
                                 seed)
    for a, b in zip(mine, theirs):
        close(a, b, 1e-3)
    module.eval()  # no dropout: one call for the stack, as torch's eval
    with rctx, torch.no_grad():
        close(module(x)[0], lstm.eval()(x)[0])


def test_converted_under_autocast(reference):
    """Under autocast the input, states and weights are cast to the autocast dtype (as cuDNN's RNN
    is): bf16 outputs close to f32 torch's, f32 gradients on the f32 parameters."""
    torch.manual_seed(8)
    gru = nn.GRU(3, 8, num_layers=2)
    module = dt.convert(copy.deepcopy(gru))
    x = torch.randn(5, 2, 3)
    with reference, torch.autocast("cpu", dtype=torch.bfloat16):
        out, h = module(x)
        out.float().sum().backward()
    assert out.dtype == torch.bfloat16 and h.dtype == torch.bfloat16
    want, h_want = gru(x)
    close(out, want, 3e-2)
    close(h, h_want, 3e-2)
    want.sum().backward()
    for mine, theirs in zip(module.parameters(), gru.parameters()):
        assert mine.grad.dtype == torch.float32
        close(mine.grad, theirs.grad, 1e-1)


def test_converted_bad_inputs(reference):
    module = dt.convert(nn.GRU(3, 4))
    with reference, pytest.raises(dnnx.InvalidArgument):
        module(torch.randn(5, 2, 7))
    with reference, pytest.raises(dnnx.InvalidArgument):
        module(torch.randn(5, 2, 3), torch.randn(2, 2, 4))
    with reference, pytest.raises(dnnx.InvalidArgument):
        module(torch.randn(5, 2, 3).double())


def test_converted_weights_are_kept_until_they_change(rctx):
    """Note [recurrent weights cache]: the flat weights (and the backends' conversions of them,
    keyed by their weights_version) are reused while the parameters stay the same, and built
    anew after an optimizer step, a load_state_dict, a replaced parameter, a cast, or
    weights_changed() after a write through .data; every call's output matches torch's with the
    weights of that moment."""
    torch.manual_seed(9)
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    module = dt.convert(copy.deepcopy(lstm))
    x = torch.randn(4, 2, 3)

    def check(expect_new):
        before = dict(module.__dict__.get("_dnnx_flat_weights", {}))
        with rctx, torch.no_grad():
            close(module(x)[0], lstm(x)[0])
        kept = module.__dict__["_dnnx_flat_weights"]["all"]
        if before:
            assert (kept["version"] != before["all"]["version"]) == expect_new
            assert (kept["flat"] is not before["all"]["flat"]) == expect_new
        return kept["version"]

    check(True)
    check(False)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    with rctx:
        module(x)[0].sum().backward()
    optimizer.step()
    lstm.load_state_dict(module.state_dict())
    check(True)
    check(False)
    state = {k: v + 0.5 for k, v in module.state_dict().items()}
    module.load_state_dict(state)
    lstm.load_state_dict(state)
    check(True)
    module.weight_hh_l1 = nn.Parameter(module.weight_hh_l1.detach() * 2)
    lstm.weight_hh_l1 = nn.Parameter(lstm.weight_hh_l1.detach() * 2)
    check(True)
    with torch.no_grad():  # a write the version counter does not see
        module.weight_ih_l0.data.mul_(-1)
        lstm.weight_ih_l0.data.mul_(-1)
    dt.weights_changed(module)
    check(True)
    clone = copy.deepcopy(module)  # the kept weights and the record of calls stay behind
    assert "_dnnx_flat_weights" not in clone.__dict__ and "_dnnx_calls" not in clone.__dict__
    with rctx, torch.no_grad():
        close(clone(x)[0], lstm(x)[0])
    # Inference tensors keep no version counter: concatenated on every call, nothing kept.
    with torch.inference_mode():
        fresh = dt.convert(copy.deepcopy(lstm))
        with rctx:
            close(fresh(x)[0], lstm(x)[0])
    assert not fresh.__dict__.get("_dnnx_flat_weights")


def test_weights_version_argument(rctx):
    """weights_version on the op: a promise of unchanged weights is taken at its word by a backend
    that converts them (the cpu backend does, Note [cpu rnn weights]); a new version follows the
    weights; a bad value is a dnnx.InvalidArgument."""
    torch.manual_seed(10)
    T, N, C, H = 3, 2, 4, 6
    lstm = nn.LSTM(C, H)
    x = torch.randn(T, N, C)
    w = flat(lstm)
    desc = dnnx.rnn.desc_for(x, H, "lstm")
    with rctx:
        first = dnnx.rnn.fwd(desc, x, w, weights_version=7)[0]
        w.mul_(0.5)
        stale = dnnx.rnn.fwd(desc, x, w, weights_version=7)[0]
        fresh = dnnx.rnn.fwd(desc, x, w, weights_version=8)[0]
        unversioned = dnnx.rnn.fwd(desc, x, w)[0]
    if rctx.backend == "cpu":
        assert torch.equal(stale, first)
    with torch.no_grad():
        for p in lstm.parameters():
            p.mul_(0.5)
        want = lstm(x)[0]
    close(fresh, want)
    close(unversioned, want)
    for bad in (-1, 2**64, 1.5, True, "1"):
        with rctx, pytest.raises(dnnx.InvalidArgument):
            dnnx.rnn.fwd(desc, x, w, weights_version=bad)


def test_converted_weights_back_to_back_are_not_copied(rctx):
    """Parameters lying back to back in one buffer, in order (as torch's flatten_parameters leaves
    a CUDA RNN's), are handed to the op as a view of that buffer (Note [recurrent weights
    cache]): no copy, results and gradients as torch's, and a parameter written between the
    training forward and its backward is autograd's error, as for torch's own RNN."""
    torch.manual_seed(12)
    lstm = nn.LSTM(3, 5, num_layers=2)
    module = dt.convert(copy.deepcopy(lstm))
    buffer = torch.cat([w.detach().reshape(-1) for w in module._flat_weights])
    offset = 0
    for name in module._flat_weights_names:
        parameter = getattr(module, name)
        parameter.data = buffer[offset:offset + parameter.numel()].view_as(parameter)
        offset += parameter.numel()
    x = torch.randn(4, 2, 3, requires_grad=True)
    with rctx:
        out, _ = module(x)
    kept = module.__dict__["_dnnx_flat_weights"]["all"]["flat"]
    assert kept.data_ptr() == buffer.data_ptr() and kept.numel() == buffer.numel()
    want, _ = lstm(x)
    close(out, want)
    seed = torch.randn_like(want)
    mine = torch.autograd.grad(out, [x] + list(module.parameters()), seed)
    theirs = torch.autograd.grad(want, [x] + list(lstm.parameters()), seed)
    for a, b in zip(mine, theirs):
        close(a, b, 1e-3)
    with rctx:
        out, _ = module(x)
    with torch.no_grad():
        module.weight_hh_l1.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
    with torch.no_grad():
        lstm.weight_hh_l1.mul_(2)
    with rctx, torch.no_grad():
        close(module(x)[0], lstm(x)[0])
    assert module.__dict__["_dnnx_flat_weights"]["all"]["flat"].data_ptr() == buffer.data_ptr()
