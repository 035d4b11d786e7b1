"""dnnx.torch: autograd functions against PyTorch's, a converted model against the unconverted one
(outputs, gradients, running statistics, state_dict identity), per-layer policies and the report."""

import copy

import pytest

import dnnx

torch = pytest.importorskip("torch")
dt = pytest.importorskip("dnnx.torch")
F = torch.nn.functional


def close(actual, expected, tol=1e-4):
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def test_conv_function_gradients():
    torch.manual_seed(0)
    src = torch.randn(2, 3, 7, 7, requires_grad=True)
    weight = torch.randn(4, 3, 3, 3, requires_grad=True)
    bias = torch.randn(4, requires_grad=True)
    with dnnx.Context("reference"):
        dst = dt.conv(src, weight, bias, stride=2, padding=1)
        ours = torch.autograd.grad(dst.square().sum(), (src, weight, bias))
    expected_dst = F.conv2d(src, weight, bias, stride=2, padding=1)
    theirs = torch.autograd.grad(expected_dst.square().sum(), (src, weight, bias))
    close(dst, expected_dst)
    for mine, reference in zip(ours, theirs):
        close(mine, reference, 1e-3)


def test_linear_function_on_3d_input(ctx):
    torch.manual_seed(1)
    src = torch.randn(2, 3, 5, requires_grad=True)
    weight = torch.randn(4, 5, requires_grad=True)
    bias = torch.randn(4, requires_grad=True)
    with ctx:
        dst = dt.linear(src, weight, bias)
        ours = torch.autograd.grad(dst.sum() + dst.square().sum(), (src, weight, bias))
    expected = F.linear(src, weight, bias)
    theirs = torch.autograd.grad(expected.sum() + expected.square().sum(), (src, weight, bias))
    close(dst, expected)
    for mine, reference in zip(ours, theirs):
        close(mine, reference, 1e-3)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 2 * 2, 5)
        self.relu = torch.nn.ReLU(inplace=True)
        self.act = torch.nn.SiLU()
        self.avg = torch.nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.reflect = torch.nn.Conv2d(3, 3, 1, padding_mode="reflect")

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.pool(self.act(self.avg(self.conv2(x))))
        return self.fc(x.flatten(1))


@pytest.mark.parametrize("channels_last", [False, True])
def test_converted_model_matches(ctx, channels_last):
    torch.manual_seed(2)
    model = Net()
    converted = copy.deepcopy(model)
    parameters = {name: p.data_ptr() for name, p in converted.state_dict().items()}
    assert dt.convert(converted) is converted
    assert type(converted.conv1) is dt.Conv2d and type(converted.fc) is dt.Linear
    assert type(converted.bn1) is dt.BatchNorm2d and type(converted.relu) is dt.ReLU
    assert type(converted.pool) is dt.MaxPool2d and type(converted.avg) is dt.AvgPool2d
    assert type(converted.reflect) is torch.nn.Conv2d  # reflect padding stays PyTorch's
    assert "padding_mode" in dt.why_not_converted(converted.reflect)
    # The same parameters and buffers, not copies; the same keys.
    assert {name: p.data_ptr() for name, p in converted.state_dict().items()} == parameters

    x = torch.randn(4, 3, 8, 8)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    with ctx:
        out = converted(x)
        out.square().sum().backward()
    expected = model(x)
    expected.square().sum().backward()
    close(out, expected, 1e-3)
    for (name, mine), (_, reference) in zip(converted.named_parameters(),
                                            model.named_parameters()):
        if reference.grad is None:
            assert mine.grad is None, name
            continue
        close(mine.grad, reference.grad, 2e-3)
    close(converted.bn1.running_mean, model.bn1.running_mean)
    close(converted.bn1.running_var, model.bn1.running_var)
    assert converted.bn1.num_batches_tracked.item() == model.bn1.num_batches_tracked.item() == 1

    converted.eval()
    model.eval()
    with ctx:
        close(converted(x), model(x), 1e-3)


def test_exclude_and_optimizer_step():
    torch.manual_seed(3)
    model = Net()
    dt.convert(model, exclude=lambda module: isinstance(module, torch.nn.Linear))
    assert type(model.fc) is torch.nn.Linear and type(model.conv1) is dt.Conv2d
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.conv1.weight.detach().clone()
    with dnnx.Context("reference"):
        model(torch.randn(2, 3, 8, 8)).sum().backward()
    optimizer.step()
    assert not torch.equal(before, model.conv1.weight)


def test_layer_policies_and_report(reference):
    torch.manual_seed(4)
    model = dt.convert(Net())
    x = torch.randn(2, 3, 8, 8)
    desc = dnnx.conv.desc_for(x, model.conv1.weight.detach(), padding=1)
    ids = [row.id for row in dnnx.algos(desc, "fwd", ctx=reference) if row.status == "supported"]
    layer = dt.algo(model.conv1)
    layer.fwd = "fixed:" + ids[-1]
    layer.bwd_weights = "exhaustive"
    layer.workspace_limit = 1 << 30
    assert layer.fwd == "fixed:" + ids[-1] and layer.workspace_limit == 1 << 30
    assert dt.algo(model.bn1).bwd == "heuristic"
    with pytest.raises(dnnx.InvalidArgument):
        dt.algo(model.bn1).bwd_weights = "exhaustive"
    with pytest.raises(dnnx.InvalidArgument):
        dt.algo(torch.nn.Identity())
    dt.algo(model.pool).bwd = "exhaustive"
    with reference:
        model(x).sum().backward()
    text = dt.report(model)
    assert f"conv1 Conv2d fwd: {ids[-1]} [fixed:{ids[-1]}]" in text
    assert "conv1 Conv2d bwd_weights" in text and "[exhaustive]" in text
    assert "fc Linear bwd_data" in text and "bn1 BatchNorm2d fwd" in text
    assert "pool MaxPool2d bwd_data" in text and "relu ReLU fwd" in text
    assert "energy" not in text

    # An energy policy's line says what it measured, here why nothing: the host backends read no
    # energy counter, and the fastest is kept.
    layer.bwd_weights = "min_energy"
    with reference:
        model(x).sum().backward()
    line = next(line for line in dt.report(model).splitlines()
                if line.startswith("conv1 Conv2d bwd_weights"))
    assert "[min_energy]" in line
    assert line.endswith(", energy not measured: the reference backend reads no energy counter")


ACTIVATIONS = [torch.nn.Tanh(), torch.nn.Sigmoid(), torch.nn.ELU(0.5), torch.nn.ReLU6(),
               torch.nn.SiLU(), torch.nn.Softmax(dim=1), torch.nn.LogSoftmax(dim=1),
               torch.nn.AvgPool1d(2), torch.nn.MaxPool1d(3, stride=2, padding=1, dilation=1)]


@pytest.mark.parametrize("module", ACTIVATIONS, ids=[type(m).__name__ for m in ACTIVATIONS])
def test_elementwise_and_pooling_modules(ctx, module):
    torch.manual_seed(5)
    converted = dt.convert(copy.deepcopy(module))
    assert type(converted) is not type(module) and isinstance(converted, type(module))
    x = (torch.randn(2, 4, 6) * 3).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    with ctx:
        out = converted(x)
        out.backward(torch.ones_like(out) * torch.arange(out.numel()).reshape(out.shape) / 10)
    expected = module(x_ref)
    expected.backward(torch.ones_like(expected) * torch.arange(expected.numel()).reshape(
        expected.shape) / 10)
    close(out, expected)
    close(x.grad, x_ref.grad, 1e-3)


def test_cross_entropy_loss_module(ctx):
    torch.manual_seed(6)
    weight = torch.rand(5) + 0.5
    loss = dt.convert(torch.nn.CrossEntropyLoss(weight=weight, ignore_index=1))
    reference = torch.nn.CrossEntropyLoss(weight=weight, ignore_index=1)
    assert type(loss) is dt.CrossEntropyLoss
    logits = torch.randn(6, 5, requires_grad=True)
    logits_ref = logits.detach().clone().requires_grad_()
    labels = torch.tensor([0, 1, 4, 2, 3, 1])
    with ctx:
        value = loss(logits, labels)
        value.backward()
    expected = reference(logits_ref, labels)
    expected.backward()
    assert value.shape == expected.shape == ()
    close(value, expected)
    close(logits.grad, logits_ref.grad)
    with pytest.raises(dnnx.InvalidArgument, match="class-index"):
        loss(logits, torch.rand(6, 5))
    assert "label_smoothing" in dt.why_not_converted(torch.nn.CrossEntropyLoss(label_smoothing=0.1))
    assert "dim" in dt.why_not_converted(torch.nn.Softmax(dim=-1))


def test_dropout_module(ctx):
    torch.manual_seed(4)
    x = torch.randn(64, 3, 8, 8, requires_grad=True)
    model = dt.convert(torch.nn.Sequential(torch.nn.Dropout(0.25)))
    assert type(model[0]) is dt.Dropout
    with ctx:
        model.eval()
        assert model(x) is x
        model.train()
        dnnx.manual_seed(7)
        y = model(x)
        (dx,) = torch.autograd.grad((y * 2).sum(), (x,))
        dnnx.manual_seed(7)
        again = model(x.detach())
    kept = y != 0
    rate = 1 - kept.float().mean().item()
    sigma = (0.25 * 0.75 / x.numel()) ** 0.5
    assert abs(rate - 0.25) < 3 * sigma
    close(y[kept], x.detach()[kept] / 0.75, 1e-6)
    # The backward applies the forward's mask: 2 / (1 - p) where kept, 0 elsewhere.
    close(dx, kept.float() * (2 / 0.75), 1e-6)
    assert torch.equal(again, y.detach())
    calls = dt._calls(model[0])
    assert set(calls) == {"fwd_training", "bwd"}
    algo = dt.algo(model[0])
    algo.fwd_training = "exhaustive"
    assert algo.fwd_training == "exhaustive"
    assert dt.dropout(x, 0.5, training=False) is x


def test_channels_last_outputs_take_in_place_updates(ctx):
    """Outputs are tensors of their own, not views: autograd allows in-place changes to them (a
    ResNet block's `out += identity` after batch-norm)."""
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4))
    model = model.to(memory_format=torch.channels_last)
    converted = dt.convert(copy.deepcopy(model))
    x = torch.randn(2, 3, 6, 6).contiguous(memory_format=torch.channels_last)
    identity = torch.randn(2, 4, 6, 6)
    with ctx:
        out = converted(x)
        assert out.is_contiguous(memory_format=torch.channels_last) and out._base is None
        out += identity
        out.square().sum().backward()
    expected = model(x)
    expected += identity
    expected.square().sum().backward()
    close(out, expected)
    for mine, theirs in zip(converted.parameters(), model.parameters()):
        close(mine.grad, theirs.grad, 1e-3)


def test_converted_model_saves_with_its_layer_options(tmp_path):
    """torch.save / torch.load of a whole converted model that ran, with a layer's own options:
    the options come back, the record of calls (this process's contexts) does not."""
    model = dt.convert(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                           torch.nn.LSTM(4, 4)))
    x = torch.randn(1, 3, 8, 8)
    with dnnx.Context("reference"):
        out = model[0](x)
    dt.algo(model[0]).fwd = "fixed:reference:direct"
    dt.algo(model[2]).workspace_limit = 1000
    path = tmp_path / "model.pt"
    torch.save(model, path)
    try:
        loaded = torch.load(path, weights_only=False)
    except TypeError:  # PyTorch before 1.13's weights_only
        loaded = torch.load(path)
    assert type(loaded[0]) is type(model[0])
    assert dt.algo(loaded[0]).fwd == "fixed:reference:direct"
    assert dt.algo(loaded[2]).workspace_limit == 1000
    assert "_dnnx_calls" not in loaded[0].__dict__
    with dnnx.Context("reference"):
        close(loaded[0](x), out)
