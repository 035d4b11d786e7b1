"""dnnx.torch under torch.compile (PyTorch >= 2.4; skipped on Debian's 1.13): the custom ops pass
torch.library.opcheck, a converted model compiles into one graph (no graph break) whose forward,
gradients and running statistics match eager PyTorch, and per-layer options still apply."""

import copy

import pytest

import dnnx

torch = pytest.importorskip("torch")
dt = pytest.importorskip("dnnx.torch")
library = pytest.importorskip("dnnx._torch_library")

pytestmark = pytest.mark.skipif(
    not library.AVAILABLE,
    reason=f"torch.library.custom_op needs PyTorch >= 2.4 (this is {torch.__version__}); "
           "dnnx.torch runs its autograd functions only")


def sample_calls():
    gen = torch.Generator().manual_seed(0)

    def randn(*shape, grad=True):
        return torch.randn(*shape, generator=gen).requires_grad_(grad)

    x = randn(2, 3, 8, 8)
    logits = randn(4, 5)
    labels = torch.tensor([0, 4, 2, 1])
    return [
        ("conv", (x, randn(4, 3, 3, 3), randn(4), [1, 1], [1, 1], [1, 1], 1, "")),
        ("conv", (x.detach().contiguous(memory_format=torch.channels_last).requires_grad_(),
                  randn(6, 1, 3, 3), None, [2, 2], [1, 1], [1, 1], 3, "")),
        ("linear", (randn(3, 2, 5), randn(4, 5), randn(4), "")),
        ("pool", (x, [2, 2], [2, 2], [0, 0], [1, 1], False, "max", "")),
        ("pool", (x, [3, 3], [2, 2], [1, 1], [1, 1], True, "avg_exclude_pad", "")),
        ("activation", (x, "elu", 0.5, 6.0, "")),
        ("softmax", (x, True, "")),
        ("cross_entropy", (logits, labels, None, -100, "mean", "")),
        ("cross_entropy", (logits, labels, torch.rand(5, generator=gen), 2, "none", "")),
    ]


@pytest.mark.parametrize("index", range(len(sample_calls())))
def test_opcheck(reference, index):
    name, args = sample_calls()[index]
    with reference:
        torch.library.opcheck(getattr(torch.ops.dnnx, name).default, args,
                              test_utils=("test_schema", "test_autograd_registration",
                                          "test_faketensor", "test_aot_dispatch_static"))


def test_opcheck_batch_norm(reference):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 5, 5, generator=gen, requires_grad=True)
    weight = torch.rand(3, generator=gen, requires_grad=True)
    bias = torch.randn(3, generator=gen, requires_grad=True)
    mean, var = torch.zeros(3), torch.ones(3)
    with reference:
        for training in (True, False):
            torch.library.opcheck(torch.ops.dnnx.batch_norm.default,
                                  (x, weight, bias, mean, var, training, 0.1, 1e-5, ""),
                                  test_utils=("test_schema", "test_autograd_registration",
                                              "test_faketensor", "test_aot_dispatch_static"))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1, groups=2),
            torch.nn.SiLU(), torch.nn.AvgPool2d(2))
        self.fc = torch.nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        return torch.nn.functional.log_softmax(self.fc(self.features(x).flatten(1)), dim=1)


def test_compiled_converted_model_matches_eager(reference):
    torch.manual_seed(0)
    model = Net()
    converted = dt.convert(copy.deepcopy(model))
    x = torch.randn(4, 3, 8, 8)
    labels = torch.tensor([0, 1, 2, 3])
    loss_module = dt.convert(torch.nn.CrossEntropyLoss())
    with reference:
        # explain() runs the model: on a copy, whose batch-norm statistics may move.
        explanation = torch._dynamo.explain(dt.convert(copy.deepcopy(converted)))(x)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        compiled = torch.compile(converted, backend="aot_eager")
        out = compiled(x)
        loss_module(out, labels).backward()
    expected = model(x)
    torch.nn.functional.cross_entropy(expected, labels).backward()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    for (name, mine), theirs in zip(converted.named_parameters(), model.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-3, atol=1e-3, msg=name)
    torch.testing.assert_close(converted.features[1].running_mean, model.features[1].running_mean)
    torch.testing.assert_close(converted.features[1].running_var, model.features[1].running_var)
    # The compiled graph runs the layers' own options and records what ran.
    assert "fwd" in converted.features[0].__dict__["_dnnx_calls"]
    assert "bwd_weights" in converted.features[0].__dict__["_dnnx_calls"]
    assert "features.0 Conv2d bwd_weights" in dt.report(converted)
