"""nn.RNN / LSTM / GRU through dnnx.torch under torch.compile (PyTorch >= 2.4; skipped on
Debian's 1.13, where the drop-ins run their autograd function): torch.ops.dnnx.rnn passes
torch.library.opcheck (schema, autograd registration, fake tensors, AOT dispatch), and converted
recurrent modules compile into one graph (no graph break; convert() sets dynamo's allow_rnn, Note
[compiling recurrent layers]) whose outputs and gradients match eager PyTorch's, the backward
running through rnn_backward (Note [compiled rnn backward])."""

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

@pytest.fixture(autouse=True)
def allow_rnn_left_as_found():
    """PyTorch's default (dynamo breaks the graph at RNN modules) for each test, and whatever
    convert() set undone after it (Note [compiling recurrent layers])."""
    import torch._dynamo
    with torch._dynamo.config.patch(allow_rnn=False):
        yield


OPCHECK = ("test_schema", "test_autograd_registration", "test_faketensor",
           "test_aot_dispatch_static")


def rnn_calls():
    gen = torch.Generator().manual_seed(3)

    def randn(*shape, grad=True):
        return torch.randn(*shape, generator=gen).requires_grad_(grad)

    def weights(mode, input_size, hidden, layers, directions, bias=True):
        gates = {"LSTM": 4, "GRU": 3}.get(mode, 1)
        count = 0
        for layer in range(layers):
            width = input_size if layer == 0 else directions * hidden
            count += directions * (gates * hidden * (width + hidden) +
                                   (2 * gates * hidden if bias else 0))
        return (randn(count) * 0.3).detach().requires_grad_()

    # src, h0, c0, lengths, weights, mode, hidden, layers, bias, batch_first, bidirectional,
    # training, layer
    return [
        (randn(5, 3, 4), randn(2, 3, 6), randn(2, 3, 6), None, weights("LSTM", 4, 6, 2, 1),
         "LSTM", 6, 2, True, False, False, True, ""),
        (randn(3, 5, 4), None, None, None, weights("GRU", 4, 5, 1, 2), "GRU", 5, 1, True, True,
         True, True, ""),
        (randn(4, 2, 3), randn(2, 2, 4), None, torch.tensor([4, 2]),
         weights("RNN_TANH", 3, 4, 1, 2, bias=False), "RNN_TANH", 4, 1, False, False, True,
         True, ""),
        (randn(4, 2, 3), None, None, None, weights("LSTM", 3, 4, 1, 1), "LSTM", 4, 1, True,
         False, False, False, ""),
    ]


@pytest.mark.parametrize("index", range(len(rnn_calls())))
def test_opcheck_rnn(reference, index):
    args = rnn_calls()[index]
    with reference:
        torch.library.opcheck(torch.ops.dnnx.rnn.default, args, test_utils=OPCHECK)


def test_fake_shapes():
    """The fake implementation's outputs have the real op's shapes and dtype."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    src, h0, c0, lengths, weights, *rest = rnn_calls()[0]
    real = torch.ops.dnnx.rnn(src, h0, c0, lengths, weights, *rest)
    with FakeTensorMode() as mode:
        fake = torch.ops.dnnx.rnn(*(mode.from_tensor(t) if isinstance(t, torch.Tensor) else t
                                    for t in (src, h0, c0, lengths, weights, *rest)))
    for r, f in zip(real, fake):
        assert tuple(r.shape) == tuple(f.shape) and r.dtype == f.dtype


class Tagger(torch.nn.Module):
    def __init__(self, cell, batch_first):
        super().__init__()
        kind = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[cell]
        self.rnn = kind(4, 6, num_layers=2, bidirectional=True, batch_first=batch_first)
        self.fc = torch.nn.Linear(12, 3)

    def forward(self, x):
        out, state = self.rnn(x)
        h = state[0] if isinstance(state, tuple) else state
        return self.fc(out), h


def test_convert_lets_dynamo_trace_recurrent_layers(reference):
    """convert() sets torch._dynamo.config.allow_rnn when it swaps in a recurrent layer, unless
    told not to; without the switch dynamo breaks the graph at the converted layer, as it does at
    PyTorch's own."""
    import torch._dynamo
    x = torch.randn(5, 3, 4)
    dt.convert(torch.nn.Sequential(torch.nn.Linear(4, 4)))
    assert not torch._dynamo.config.allow_rnn
    model = dt.convert(Tagger("gru", False), compile_recurrent=False)
    assert not torch._dynamo.config.allow_rnn
    with reference:
        assert torch._dynamo.explain(model)(x).graph_break_count >= 1
    dt.convert(model)
    assert torch._dynamo.config.allow_rnn


@pytest.mark.parametrize("cell,batch_first", [("lstm", False), ("gru", True), ("rnn", False)])
def test_compiled_converted_recurrent_model_matches_eager(reference, cell, batch_first):
    torch.manual_seed(0)
    model = Tagger(cell, batch_first)
    converted = dt.convert(copy.deepcopy(model))
    x = torch.randn(3, 5, 4) if batch_first else torch.randn(5, 3, 4)
    with reference:
        explanation = torch._dynamo.explain(dt.convert(copy.deepcopy(converted)))(x)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        compiled = torch.compile(converted, backend="aot_eager")
        out, h = compiled(x)
        (out.square().sum() + h.sum()).backward()
    expected, expected_h = model(x)
    (expected.square().sum() + expected_h.sum()).backward()
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(h, expected_h, rtol=1e-4, atol=1e-4)
    for (name, mine), theirs in zip(converted.named_parameters(), model.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-3, atol=1e-3, msg=name)
    # The compiled graph runs the layer's own options and records what ran.
    calls = converted.rnn.__dict__["_dnnx_calls"]
    assert "fwd_training" in calls and "bwd_weights" in calls
    assert f"rnn {type(converted.rnn).__name__} bwd_weights" in dt.report(converted)


def test_compiled_inference_runs_the_inference_forward(reference):
    torch.manual_seed(1)
    model = dt.convert(torch.nn.GRU(3, 4, num_layers=2))
    x = torch.randn(6, 2, 3)
    with reference, torch.no_grad():
        out, h = torch.compile(model, backend="aot_eager")(x)
        expected, expected_h = model(x)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    torch.testing.assert_close(h, expected_h, rtol=0, atol=0)
    calls = model.__dict__["_dnnx_calls"]
    assert "fwd" in calls and "fwd_training" not in calls
