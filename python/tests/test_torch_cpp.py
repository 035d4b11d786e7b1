"""dnnx._torch_ext (Note [layers in C++] in python/src/torch_ext/module.cpp): the eager calls of
converted convolution, batch-norm, pooling and activation layers in C++ give what the Python
autograd functions give, bit for bit, and decline what they do not take."""

import copy
import pickle

import pytest

import dnnx

torch = pytest.importorskip("torch")
import dnnx.torch as dt  # noqa: E402

pytestmark = pytest.mark.skipif(not dt.CPP_LAYERS, reason=f"no C++ layers: {dt.CPP_LAYERS_WHY}")


@pytest.fixture
def python_path(monkeypatch):
    """Within the test, calls run the Python way when python_path() is on."""
    saved = dt._cpp

    class Switch:
        def __call__(self, on):
            monkeypatch.setattr(dt, "_cpp", None if on else saved)

    return Switch()


def _run(module, x, grad):
    x = x.detach().requires_grad_()
    y = module(x)
    y.backward(grad)
    return y.detach(), x.grad, [p.grad.clone() for p in module.parameters()], y


LAYERS = {
    "conv2d": lambda: torch.nn.Conv2d(6, 8, 3, padding=1),
    "conv2d_groups_stride": lambda: torch.nn.Conv2d(6, 9, 3, stride=2, padding=2, dilation=2,
                                                    groups=3, bias=False),
    "conv1d": lambda: torch.nn.Conv1d(6, 4, 5, padding=2),
    "conv3d": lambda: torch.nn.Conv3d(6, 4, 3, padding=1),
    "bn2d": lambda: torch.nn.BatchNorm2d(6),
    "bn2d_no_affine": lambda: torch.nn.BatchNorm2d(6, affine=False),
    "bn2d_no_running": lambda: torch.nn.BatchNorm2d(6, track_running_stats=False),
    "bn2d_eval": lambda: torch.nn.BatchNorm2d(6).eval(),
    "maxpool": lambda: torch.nn.MaxPool2d(3, 2, 1),
    "maxpool_ceil": lambda: torch.nn.MaxPool2d(2, ceil_mode=True),
    "avgpool": lambda: torch.nn.AvgPool2d(3, 2, 1),
    "avgpool_exclude": lambda: torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False),
    "relu": torch.nn.ReLU,
    "relu6": torch.nn.ReLU6,
    "tanh": torch.nn.Tanh,
    "sigmoid": torch.nn.Sigmoid,
    "silu": torch.nn.SiLU,
    "elu": lambda: torch.nn.ELU(0.5),
    "linear": lambda: torch.nn.Linear(10, 7),  # on the last dim of the 4-D input
    "linear_no_bias": lambda: torch.nn.Linear(10, 5, bias=False),
    "softmax": lambda: torch.nn.Softmax(dim=1),
    "log_softmax": lambda: torch.nn.LogSoftmax(dim=1),
}


_FORMATS = {4: torch.channels_last, 5: torch.channels_last_3d}


def _input(name, channels_last):
    shape = {"conv1d": (3, 6, 11), "conv3d": (2, 6, 5, 6, 7)}.get(name, (3, 6, 9, 10))
    x = torch.randn(*shape)
    if channels_last and len(shape) in _FORMATS:
        x = x.contiguous(memory_format=_FORMATS[len(shape)])
    return x


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_cpp_layer_matches_the_python_path(python_path, name, channels_last):
    torch.manual_seed(0)
    module = LAYERS[name]()
    reference = copy.deepcopy(module)
    x = _input(name, channels_last)
    if channels_last and x.dim() in _FORMATS:
        module = module.to(memory_format=_FORMATS[x.dim()])
    converted = dt.convert(copy.deepcopy(module))
    python = dt.convert(copy.deepcopy(module))
    grad = torch.randn_like(reference(x.clone()))

    y, gx, gp, out = _run(converted, x, grad)
    assert out.grad_fn.name().startswith("Dnnx"), out.grad_fn.name()
    python_path(True)
    y_py, gx_py, gp_py, out_py = _run(python, x, grad)
    assert not out_py.grad_fn.name().startswith("Dnnx")
    assert torch.equal(y, y_py)
    assert torch.equal(gx, gx_py)
    for mine, theirs in zip(gp, gp_py):
        assert torch.equal(mine, theirs)
    for mine, theirs in zip(converted.buffers(), python.buffers()):
        assert torch.equal(mine, theirs)
    if channels_last and x.dim() in _FORMATS and not name.startswith("linear"):
        assert y.is_contiguous(memory_format=_FORMATS[x.dim()])

    # and both as PyTorch's own layer computes it
    y_ref, gx_ref, gp_ref, _ = _run(reference, x, grad)
    torch.testing.assert_close(y, y_ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gx, gx_ref, rtol=1e-4, atol=1e-4)
    for mine, theirs in zip(gp, gp_ref):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-4)


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (label gpu)")


@cuda
@pytest.mark.parametrize("name", ["conv2d", "conv2d_groups_stride", "conv3d", "bn2d", "bn2d_eval",
                                  "maxpool", "avgpool", "relu", "silu", "linear", "softmax"])
def test_cpp_layer_on_the_gpu_under_autocast_on_a_side_stream(python_path, name):
    """f16 channels_last under torch.autocast, on a side stream: as the Python path, as PyTorch."""
    torch.manual_seed(3)
    module = LAYERS[name]().cuda()
    x = _input(name, True).cuda()
    if x.dim() in _FORMATS:
        module = module.to(memory_format=_FORMATS[x.dim()])
    reference = copy.deepcopy(module)
    converted = dt.convert(copy.deepcopy(module))
    python = dt.convert(copy.deepcopy(module))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    results = {}
    for label, net in (("cpp", converted), ("python", python), ("torch", reference)):
        python_path(label == "python")
        with torch.cuda.stream(side), torch.autocast("cuda", dtype=torch.float16):
            # PyTorch's own reference on the contiguous input: its channels_last avg_pool2d
            # backward with padding gives wrong gradients (pytorch/pytorch#188344, 2.11 included)
            x_in = (x.contiguous() if label == "torch" else x).detach().requires_grad_()
            y = net(x_in)
            if label == "cpp":
                assert y.grad_fn.name().startswith("Dnnx"), y.grad_fn.name()
            y.float().square().sum().backward()
        side.synchronize()
        results[label] = (y.float(), x_in.grad, [p.grad for p in net.parameters()])
    for other, tolerance in (("python", 1e-3), ("torch", 2e-2)):
        torch.testing.assert_close(results["cpp"][0], results[other][0], rtol=tolerance,
                                   atol=tolerance)
        torch.testing.assert_close(results["cpp"][1].float(), results[other][1].float(),
                                   rtol=tolerance, atol=tolerance)
        for mine, theirs in zip(results["cpp"][2], results[other][2]):
            torch.testing.assert_close(mine.float(), theirs.float(), rtol=tolerance,
                                       atol=tolerance * max(1.0, theirs.abs().max().item()))


def test_cpp_layers_train_a_model_as_the_python_path(python_path):
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(8), torch.nn.SiLU(), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(8 * 4 * 4, 5))
    x, labels = torch.randn(6, 3, 16, 16), torch.randint(0, 5, (6,))
    losses = {}
    for path in ("cpp", "python"):
        python_path(path == "python")
        net = dt.convert(copy.deepcopy(model))
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        losses[path] = []
        for _ in range(4):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x), labels)
            loss.backward()
            optimizer.step()
            losses[path].append(loss.item())
    assert losses["cpp"] == losses["python"]
    assert losses["cpp"][-1] < losses["cpp"][0]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", ["2d", "4d_nhwc", "weighted_ignore"])
def test_cross_entropy_matches_the_python_path(python_path, case, reduction):
    torch.manual_seed(6)
    if case == "2d":
        logits, labels, options = torch.randn(8, 5), torch.randint(0, 5, (8,)), {}
    elif case == "4d_nhwc":
        logits = torch.randn(2, 5, 3, 4).contiguous(memory_format=torch.channels_last)
        labels, options = torch.randint(0, 5, (2, 3, 4)), {}
    else:
        logits, labels = torch.randn(8, 5), torch.randint(0, 5, (8,))
        labels[2] = -100
        options = {"weight": torch.rand(5) + 0.5}
    loss_module = torch.nn.CrossEntropyLoss(reduction=reduction, **options)
    results = {}
    for path in ("cpp", "python"):
        python_path(path == "python")
        module = dt.convert(copy.deepcopy(loss_module))
        x = logits.detach().requires_grad_()
        loss = module(x, labels)
        assert (loss.grad_fn.name() == "DnnxCrossEntropyBackward") == (path == "cpp")
        (loss * torch.arange(1.0, loss.numel() + 1).reshape(loss.shape)).sum().backward()
        results[path] = (loss.detach(), x.grad)
    assert results["cpp"][0].shape == results["python"][0].shape
    for mine, theirs in zip(results["cpp"], results["python"]):
        assert torch.equal(mine, theirs)
    x = logits.detach().requires_grad_()
    reference = loss_module(x, labels)
    (reference * torch.arange(1.0, reference.numel() + 1).reshape(reference.shape)).sum() \
        .backward()
    torch.testing.assert_close(results["cpp"][0], reference.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results["cpp"][1], x.grad, rtol=1e-5, atol=1e-6)


def test_cross_entropy_with_class_probabilities_goes_the_python_way():
    module = dt.convert(torch.nn.CrossEntropyLoss())
    with pytest.raises(dnnx.InvalidArgument, match="class-index"):
        module(torch.randn(4, 3), torch.rand(4, 3))


def test_linear_on_one_and_three_dims(python_path):
    torch.manual_seed(5)
    linear = torch.nn.Linear(6, 4)
    for shape in [(6,), (2, 3, 6)]:
        results = {}
        for path in ("cpp", "python"):
            python_path(path == "python")
            net = dt.convert(copy.deepcopy(linear))
            x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).requires_grad_()
            y = net(x)
            assert y.shape == linear(x).shape
            assert (y.grad_fn.name() == "DnnxLinearBackward") == (path == "cpp")
            y.square().sum().backward()
            results[path] = (y.detach(), x.grad, net.weight.grad, net.bias.grad)
        for mine, theirs in zip(results["cpp"], results["python"]):
            assert torch.equal(mine, theirs)


def test_no_grad_and_inputs_without_grad_record_nothing():
    conv = dt.convert(torch.nn.Conv2d(3, 4, 3))
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert conv(x).grad_fn is None
    conv.weight.requires_grad_(False)
    conv.bias.requires_grad_(False)
    assert conv(x).grad_fn is None
    assert conv(x.requires_grad_()).grad_fn.name() == "DnnxConvBackward"


def test_autocast_casts_as_pytorchs_convolution():
    torch.manual_seed(2)
    conv = torch.nn.Conv2d(4, 6, 3, padding=1)
    converted = dt.convert(copy.deepcopy(conv))
    x = torch.randn(2, 4, 8, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = converted(x)
        y_ref = conv(x)
    assert y.dtype == y_ref.dtype == torch.bfloat16
    assert y.grad_fn.name() == "DnnxConvBackward"
    y.float().sum().backward()
    assert converted.weight.grad.dtype == torch.float32
    assert x.grad.dtype == torch.float32
    torch.testing.assert_close(y.float(), y_ref.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kind", ["conv", "linear"])
def test_autocast_parameters_are_cast_by_the_layers_node(python_path, kind):
    """Note [parameter casts]: under autocast the weight and bias reach the dnnx node directly (no
    cast node of autograd's between them), their gradients come back in f32, and every value is
    the Python path's, whose autograd records autocast's casts."""
    torch.manual_seed(4)
    if kind == "conv":
        module, x = torch.nn.Conv2d(4, 6, 3, padding=1), torch.randn(2, 4, 8, 8)
    else:
        module, x = torch.nn.Linear(12, 5), torch.randn(3, 12)
    results = {}
    for label in ("cpp", "python"):
        python_path(label == "python")
        net = dt.convert(copy.deepcopy(module))
        x_in = x.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = net(x_in)
        if label == "cpp":
            assert y.grad_fn.name() in ("DnnxConvBackward", "DnnxLinearBackward")
            edges = [edge[0] for edge in y.grad_fn.next_functions]
            assert [type(e).__name__ for e in edges[1:]] == ["AccumulateGrad"] * 2
            assert edges[1].variable is net.weight and edges[2].variable is net.bias
        y.float().square().sum().backward()
        results[label] = (y, x_in.grad, net.weight.grad, net.bias.grad)
    for mine, theirs in zip(results["cpp"], results["python"]):
        assert mine.dtype == theirs.dtype
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    assert results["cpp"][2].dtype == results["cpp"][3].dtype == torch.float32


def test_a_context_block_and_its_options_reach_forward_and_backward():
    conv = dt.convert(torch.nn.Conv2d(3, 4, 3))
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    context = dnnx.Context("reference")
    with context:
        y = conv(x)
    assert y.grad_fn.name() == "DnnxConvBackward"
    y.sum().backward()  # outside the block: the forward's context
    for direction in ("fwd", "bwd_data", "bwd_weights"):
        assert dt._calls(conv)[direction][1].backend == "reference"
    with context.tuning(conv={"fwd": "fixed:reference:direct"}), context:
        conv(x)
    assert "Conv2d fwd: reference:direct [fixed:reference:direct]" in dt.report(conv)
    conv(x)  # after the block: the host's default context again
    assert dt._calls(conv)["fwd"][1].backend == dt._layer_context(x, None).backend


def _other_candidate(module, direction):
    desc, context = dt._calls(module)[direction]
    chosen = dnnx.select(desc, direction, ctx=context).id
    rows = [row for row in dnnx.algos(desc, direction, ctx=context) if row.status == "supported"]
    others = [row.id for row in rows if row.id != chosen]
    return chosen, (others[0] if others else None)


def test_layer_and_default_options_take_effect_between_calls():
    conv = dt.convert(torch.nn.Conv2d(8, 8, 3, padding=1))
    x = torch.randn(2, 8, 12, 12, requires_grad=True)
    conv(x).sum().backward()
    _, other = _other_candidate(conv, "fwd")
    if other is None:
        pytest.skip("one supported forward candidate on this machine")
    dt.algo(conv).fwd = f"fixed:{other}"
    conv(x).sum().backward()
    assert f"Conv2d fwd: {other} [fixed:{other}]" in dt.report(conv)
    dt.algo(conv).fwd = "heuristic"
    conv(x)
    assert "Conv2d fwd: " in dt.report(conv) and f"[fixed:{other}]" not in dt.report(conv)

    relu = dt.convert(torch.nn.ReLU())
    relu(x)
    default = dnnx.default_context()
    saved = default.tune.copy()
    try:
        default.tune.act.fwd = "exhaustive"
        relu(x)
        assert "[exhaustive]" in dt.report(relu)
    finally:
        default.tune = saved
    relu(x)
    assert "[exhaustive]" not in dt.report(relu)


def test_errors_keep_their_kind_forward_and_backward(python_path):
    conv = dt.convert(torch.nn.Conv2d(3, 4, 3))
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    dt.algo(conv).bwd_data = "fixed:no-such-candidate"
    y = conv(x)
    assert y.grad_fn.name() == "DnnxConvBackward"
    with pytest.raises(dnnx.Error) as cpp_error:
        y.sum().backward()
    python_path(True)
    with pytest.raises(dnnx.Error) as python_error:
        conv(x).sum().backward()
    assert type(cpp_error.value) is type(python_error.value)
    assert cpp_error.value.op == python_error.value.op
    python_path(False)
    dt.algo(conv).bwd_data = "heuristic"
    dt.algo(conv).fwd = "fixed:no-such-candidate"
    with pytest.raises(dnnx.Error) as forward_error:
        conv(x)
    assert "no-such-candidate" in str(forward_error.value)


def test_bad_inputs_go_the_python_way_and_fail_there():
    conv = dt.convert(torch.nn.Conv2d(3, 4, 3))
    with pytest.raises(dnnx.InvalidArgument):
        conv(torch.randn(2, 3, 8, 8, dtype=torch.float64))
    with pytest.raises(dnnx.Error):
        conv(torch.randn(2, 5, 8, 8))  # channels that do not match the weights
    with pytest.raises(TypeError):
        conv.__dict__["_dnnx_cpp"].conv(torch.randn(2, 3, 8, 8), conv.weight, None, "not tune",
                                        (1, 0, 1, 1))


def test_saved_tensors_modified_in_place_are_refused():
    relu = dt.convert(torch.nn.Tanh())
    x = torch.randn(4, 5, requires_grad=True)
    y = relu(x * 1.0)
    y.mul_(2)  # the output is saved for the backward
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_converted_layers_with_cpp_state_copy_and_pickle():
    model = dt.convert(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                           torch.nn.ReLU()))
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    assert "_dnnx_cpp" in model[0].__dict__
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert "_dnnx_cpp" not in clone[0].__dict__
        out = clone(torch.randn(2, 3, 8, 8))
        assert out.grad_fn.name() == "DnnxActivationBackward"


def test_forward_mode_tangents_and_traces_take_the_python_path():
    import torch.autograd.forward_ad as fwAD
    tanh = dt.convert(torch.nn.Tanh())
    cpp = dt._cpp_layer(tanh, "activation")
    settings = ("tanh", 1.0, 6.0)
    x = torch.randn(3, 4)
    assert cpp.activation(x, None, settings) is not None
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.randn(3, 4))
        assert cpp.activation(dual, None, settings) is None  # the tangent would be lost

    conv = dt.convert(torch.nn.Conv2d(3, 4, 3))
    cpp = dt._cpp_layer(conv, "conv")
    returned = []

    def traced(x):
        returned.append(cpp.conv(x, conv.weight, conv.bias, None, (1, 0, 1, 1)))
        return x * 2

    torch.jit.trace(traced, torch.randn(1, 3, 8, 8), check_trace=False)
    assert returned == [None]  # the trace would not see the op
    assert cpp.conv(torch.randn(1, 3, 8, 8), conv.weight, conv.bias, None, (1, 0, 1, 1)) \
        is not None


@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_dropout_draws_the_mask_the_python_path_draws(python_path, channels_last):
    x = torch.randn(4, 6, 5, 5)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    results = {}
    for path in ("cpp", "python"):
        python_path(path == "python")
        layer = dt.convert(torch.nn.Dropout(0.3))
        layer.generator = dnnx.Generator(7)
        x_in = x.detach().requires_grad_()
        y = layer(x_in)
        assert (y.grad_fn.name() == "DnnxDropoutBackward") == (path == "cpp")
        y.backward(torch.arange(float(y.numel())).reshape(y.shape))
        results[path] = (y.detach(), x_in.grad)
        assert "Dropout fwd_training: " in dt.report(layer)
    for mine, theirs in zip(results["cpp"], results["python"]):
        assert torch.equal(mine, theirs)
    kept = results["cpp"][0] != 0
    torch.testing.assert_close(results["cpp"][0][kept], x[kept] / 0.7)
    rate = 1.0 - kept.float().mean().item()
    assert abs(rate - 0.3) < 3 * (0.3 * 0.7 / x.numel()) ** 0.5
    layer.eval()
    assert layer(x) is x


def test_dropout_backward_twice_without_retain_graph_is_refused():
    layer = dt.convert(torch.nn.Dropout(0.5))
    y = layer(torch.randn(8, 8, requires_grad=True))
    assert y.grad_fn.name() == "DnnxDropoutBackward"
    y.sum().backward(retain_graph=True)
    y.sum().backward()  # kept by retain_graph
    with pytest.raises((dnnx.Error, RuntimeError), match="backward"):
        y.sum().backward()


def test_a_backward_that_autograd_would_record_is_refused():
    conv = dt.convert(torch.nn.Conv2d(3, 4, 3))
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    loss = conv(x).square().sum()
    with pytest.raises(dnnx.Unsupported, match="create_graph"):
        torch.autograd.grad(loss, x, create_graph=True)
    (gx,) = torch.autograd.grad(conv(x).square().sum(), x)  # first order as before
    assert gx.shape == x.shape


def test_a_layer_shared_by_threads_keys_each_call_by_its_own_tensors():
    """nn.DataParallel's replicas share a converted layer's C++ state across threads; a call
    whose desc is built by Python (the GIL changing hands) must still get its own desc."""
    import threading
    torch.manual_seed(8)
    conv = dt.convert(torch.nn.Conv2d(3, 4, 3, padding=1))
    weight, bias = conv.weight.detach(), conv.bias.detach()
    failures = []

    def work(offset):
        try:
            for i in range(60):  # more shapes than the 16 descs a layer keeps: many misses
                size = 4 + (offset + i) % 24
                x = torch.randn(1, 3, size, size)
                with torch.no_grad():
                    out = conv(x)
                expected = torch.nn.functional.conv2d(x, weight, bias, padding=1)
                if out.shape != expected.shape or not torch.allclose(out, expected, atol=1e-5):
                    failures.append((offset, i, tuple(out.shape), tuple(expected.shape)))
        except Exception as error:  # reported in the test's thread
            failures.append(error)

    import sys
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as possible
    try:
        threads = [threading.Thread(target=work, args=(k * 7,)) for k in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures[:3]


def test_functional_calls_run_in_cpp_as_the_modules_do():
    torch.manual_seed(9)
    F = torch.nn.functional
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    w, b = torch.randn(4, 3, 3, 3, requires_grad=True), torch.randn(4, requires_grad=True)
    cases = [
        (lambda: dt.conv(x, w, b, padding=1), lambda: F.conv2d(x, w, b, padding=1)),
        (lambda: dt.linear(x, torch.ones(5, 8)), lambda: F.linear(x, torch.ones(5, 8))),
        (lambda: dt.pool(x, 2, mode="avg_include_pad"), lambda: F.avg_pool2d(x, 2)),
        (lambda: dt.activation(x, "tanh"), lambda: torch.tanh(x)),
        (lambda: dt.softmax(x, log=True), lambda: F.log_softmax(x, dim=1)),
        (lambda: dt.batch_norm(x, None, None, training=True),
         lambda: F.batch_norm(x, None, None, training=True)),
        (lambda: dt.cross_entropy(x[:, :, 0, 0], torch.tensor([0, 2])),
         lambda: F.cross_entropy(x[:, :, 0, 0], torch.tensor([0, 2]))),
    ]
    for ours, theirs in cases:
        y, expected = ours(), theirs()
        assert y.grad_fn.name().startswith("Dnnx"), y.grad_fn.name()
        torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-5)
        g_ours = torch.autograd.grad(y.sum(), x)[0]
        g_theirs = torch.autograd.grad(expected.sum(), x)[0]
        torch.testing.assert_close(g_ours, g_theirs, rtol=1e-4, atol=1e-5)
    dnnx.manual_seed(3)
    y = dt.dropout(x, 0.5)
    assert y.grad_fn.name() == "DnnxDropoutBackward"
    dnnx.manual_seed(3)
    assert torch.equal(y, dt.dropout(x, 0.5))


@pytest.mark.parametrize("module", [torch.nn.ReLU(inplace=True), torch.nn.ReLU6(inplace=True),
                                    torch.nn.ELU(alpha=0.5, inplace=True)],
                         ids=["relu", "relu6", "elu"])
@pytest.mark.parametrize("python", [False, True], ids=["cpp", "python_path"])
@pytest.mark.parametrize("channels_last", [False, True], ids=["nchw", "nhwc"])
def test_inplace_activation_writes_over_its_input(python_path, module, python, channels_last):
    """Note [in-place activations]: as PyTorch's in-place op: the input tensor is the output,
    its version moves, its history is the dnnx node's, and the gradients are PyTorch's; in C++
    and on the Python path (ActivationInPlaceFunction) alike."""
    python_path(python)
    torch.manual_seed(5)
    x = torch.randn(2, 3, 5, 5) * 4
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    results = {}
    for label, layer in (("dnnx", dt.convert(copy.deepcopy(module))), ("torch", module)):
        x_in = x.clone().requires_grad_()
        z = x_in * 1.5
        version = z._version
        y = layer(z)
        if label == "dnnx":
            assert y is z and z._version > version
            assert y.grad_fn.name() == ("ActivationInPlaceFunctionBackward" if python
                                        else "DnnxActivationBackward")
            assert dt._calls(layer)["fwd"][0].saved == "dst"
        y.square().sum().backward()
        results[label] = (y.detach(), x_in.grad)
    torch.testing.assert_close(results["dnnx"][0], results["torch"][0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(results["dnnx"][1], results["torch"][1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("python", [False, True], ids=["cpp", "python_path"])
def test_inplace_activation_falls_back_out_of_place(python_path, python):
    python_path(python)
    relu = dt.convert(torch.nn.ReLU(inplace=True))
    leaf = torch.randn(4, 6, requires_grad=True)
    y = relu(leaf)  # PyTorch's relu_ refuses a leaf that requires grad: out of place here
    assert y is not leaf and y.grad_fn is not None
    assert dt._calls(relu)["fwd"][0].saved == "src_and_dst"
    base = torch.randn(4, 6) * 2
    view = base.t()
    y = relu(view)  # a view: out of place
    assert y is not view and (base < 0).any()
    silu = dt.convert(torch.nn.SiLU(inplace=True))  # its backward needs the input
    z = torch.randn(3, 4) * 2
    assert silu(z) is not z and (z < 0).any()
    with torch.no_grad():
        leaf2 = torch.randn(4, 6) * 2
        y = relu(leaf2)
        # no autograd: C++ writes a leaf in place, as PyTorch does; the Python path, which has
        # no way to move the version then, computes out of place
        assert (y is leaf2) != python and (y >= 0).all()


@pytest.mark.parametrize("python", [False, True], ids=["cpp", "python_path"])
def test_inplace_activation_trips_autograds_saved_tensor_check(python_path, python):
    """A tensor another node saved and the in-place layer then overwrote: autograd's error, as
    for PyTorch's relu_."""
    python_path(python)
    relu = dt.convert(torch.nn.ReLU(inplace=True))
    x = torch.randn(3, 4, requires_grad=True)
    z = x * 2
    w = z.sin()  # saves z
    relu(z)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        w.sum().backward()


def test_inplace_activation_and_inference_tensors():
    relu = dt.convert(torch.nn.ReLU(inplace=True))
    with torch.inference_mode():
        x = torch.randn(3, 4) * 2
        assert relu(x) is x and (x >= 0).all()
        kept = torch.randn(3, 4) * 2
    out = relu(kept)  # an inference tensor outside inference mode: out of place
    assert out is not kept and (kept < 0).any() and (out >= 0).all()


def test_autocast_leaves_f64_as_it_is(python_path):
    """Autocast casts no f64 tensor (PyTorch's conv2d then runs in f64); dnnx has no f64, so a
    converted f64 layer under autocast raises as it does without autocast, on either path."""
    conv = dt.convert(torch.nn.Conv2d(2, 3, 3).double())
    x = torch.randn(1, 2, 5, 5, dtype=torch.float64)
    for python in (False, True):
        python_path(python)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            with pytest.raises(dnnx.InvalidArgument, match="float64"):
                conv(x)


@pytest.mark.parametrize("python", [False, True], ids=["cpp", "python_path"])
@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.AdaptiveAvgPool2d(1), (2, 5, 7, 7)),
    (lambda: torch.nn.AdaptiveAvgPool2d((2, None)), (2, 3, 6, 5)),
    (lambda: torch.nn.AdaptiveMaxPool2d(2), (2, 3, 8, 6)),
    (lambda: torch.nn.AdaptiveAvgPool1d(4), (2, 3, 12)),
    (lambda: torch.nn.AdaptiveMaxPool1d(3), (2, 3, 9)),
    (lambda: torch.nn.AdaptiveAvgPool3d((1, 2, 2)), (1, 2, 4, 4, 6)),
    (lambda: torch.nn.AdaptiveMaxPool3d(1), (1, 2, 3, 4, 5)),
], ids=["avg2d_global", "avg2d_none", "max2d", "avg1d", "max1d", "avg3d", "max3d"])
def test_adaptive_pooling_that_is_a_plain_pooling_runs_through_dnnx(python_path, python, make,
                                                                    shape):
    python_path(python)
    torch.manual_seed(6)
    module = make()
    converted = dt.convert(copy.deepcopy(module))
    assert type(converted).__name__ == type(module).__name__ and converted is not module
    for channels_last in (False, True):
        x = torch.randn(*shape)
        if channels_last and x.dim() in _FORMATS:
            x = x.contiguous(memory_format=_FORMATS[x.dim()])
        mine, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
        y, y_ref = converted(mine), module(theirs)
        assert "Backward" in y.grad_fn.name() and "Adaptive" not in y.grad_fn.name()
        kernel = tuple(dt._calls(converted)["fwd"][0].kernel)[:x.dim() - 2]  # padded with 1s
        assert kernel == tuple(have // want for have, want in zip(x.shape[2:], y_ref.shape[2:]))
        grad = torch.randn_like(y_ref)
        y.backward(grad)
        y_ref.backward(grad)
        torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-5, atol=1e-6)


def test_adaptive_pooling_with_uneven_windows_stays_pytorchs():
    module = torch.nn.AdaptiveAvgPool2d(3)
    converted = dt.convert(copy.deepcopy(module))
    for x in (torch.randn(2, 4, 7, 8, requires_grad=True),  # 7 and 8 are not multiples of 3
              torch.randn(4, 6, 6, requires_grad=True)):  # unbatched
        y = converted(x)
        assert y.grad_fn.name().startswith("AdaptiveAvgPool2D")
        assert torch.equal(y, module(x))
    indices = torch.nn.AdaptiveMaxPool2d(2, return_indices=True)
    assert dt.why_not_converted(indices).startswith("return_indices")
    assert type(dt.convert(indices)) is torch.nn.AdaptiveMaxPool2d
