#!/usr/bin/env python3
"""dnnx's reference recurrent layer against PyTorch (the oracle of the oracle).

    torch_rnn_parity.py RNN_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below: numpy draws float32 inputs, rnn_harness runs the training
forward, the backward w.r.t. the data and the backward w.r.t. the weights (overwriting and
accumulating) on dnnx's reference backend, and torch computes the same in float64 with
torch.nn.RNN (relu, tanh), nn.LSTM or nn.GRU whose parameters are copied from dnnx's flat weights
in the order of the module's _flat_weights (Note [rnn weight layout]), sequences of different
lengths through pack_padded_sequence (enforce_sorted=False) and pad_packed_sequence, and autograd
for the gradients of sum(dst * diff_dst) + sum(hy * diff_hy) (+ sum(cy * diff_cy)) w.r.t. src,
hx, cx and every parameter. The reference sums in f64 and rounds each output once to f32, so
every element must agree within 4 f32 units of rounding of torch's value (plus 1e-12 for the
order of f64 sums).

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import sys

import oracle_common
from oracle_common import np, torch

ULP = 2.0 ** -24


def case(name, cell, seq, batch, inp, hidden, layers=1, bidirectional=False, bias=True,
         batch_first=False, lengths=None):
    return {"name": name, "cell": cell, "seq": seq, "batch": batch, "input": inp,
            "hidden": hidden, "layers": layers, "bidirectional": bidirectional, "bias": bias,
            "batch_first": batch_first, "lengths": lengths}


CASES = [
    case("lstm", "lstm", 5, 3, 4, 6),
    case("lstm_bi_2layers", "lstm", 4, 2, 3, 5, layers=2, bidirectional=True),
    case("lstm_varlen_batch_first", "lstm", 6, 4, 3, 4, batch_first=True, lengths=[6, 2, 5, 1]),
    case("gru", "gru", 5, 3, 4, 6),
    case("gru_bi_varlen", "gru", 5, 3, 2, 3, bidirectional=True, lengths=[3, 5, 1]),
    case("gru_2layers_no_bias", "gru", 3, 2, 5, 4, layers=2, bias=False),
    case("rnn_tanh", "rnn_tanh", 7, 2, 3, 5),
    case("rnn_relu_bi_3layers", "rnn_relu", 3, 2, 4, 3, layers=3, bidirectional=True),
    case("rnn_tanh_varlen_2layers", "rnn_tanh", 4, 3, 3, 4, layers=2, lengths=[2, 4, 3]),
    case("lstm_seq1_batch1", "lstm", 1, 1, 2, 3),
    case("gru_batch_first_bi", "gru", 3, 2, 3, 2, bidirectional=True, batch_first=True),
]


def gates(cell):
    return {"lstm": 4, "gru": 3}.get(cell, 1)


def module_of(c):
    kwargs = dict(input_size=c["input"], hidden_size=c["hidden"], num_layers=c["layers"],
                  bias=c["bias"], batch_first=c["batch_first"],
                  bidirectional=c["bidirectional"])
    if c["cell"] == "lstm":
        return torch.nn.LSTM(**kwargs)
    if c["cell"] == "gru":
        return torch.nn.GRU(**kwargs)
    return torch.nn.RNN(nonlinearity=c["cell"][4:], **kwargs)


def torch_rnn(c, a):
    """Every output in float64, by name."""
    module = module_of(c).double()
    flat = torch.tensor(a["weights"], dtype=torch.float64)
    offset = 0
    with torch.no_grad():
        for parameter in module._flat_weights:
            count = parameter.numel()
            parameter.copy_(flat[offset:offset + count].view_as(parameter))
            offset += count
    assert offset == flat.numel(), (offset, flat.numel())
    lstm = c["cell"] == "lstm"
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in a.items() if k in ("src", "hx", "cx")}
    x = t["src"]
    if c["lengths"] is not None:
        x = torch.nn.utils.rnn.pack_padded_sequence(
            x, torch.tensor(c["lengths"]), batch_first=c["batch_first"], enforce_sorted=False)
    state = (t["hx"], t["cx"]) if lstm else t["hx"]
    y, final = module(x, state)
    if c["lengths"] is not None:
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=c["batch_first"],
                                                      total_length=c["seq"])
    hy, cy = final if lstm else (final, None)
    loss = (y * torch.tensor(a["diff_dst"], dtype=torch.float64)).sum() + \
        (hy * torch.tensor(a["diff_hy"], dtype=torch.float64)).sum()
    if lstm:
        loss = loss + (cy * torch.tensor(a["diff_cy"], dtype=torch.float64)).sum()
    loss.backward()
    diff_weights = torch.cat([p.grad.reshape(-1) for p in module._flat_weights]).numpy()
    out = {"dst": y.detach().numpy(), "hy": hy.detach().numpy(),
           "diff_src": t["src"].grad.numpy(), "diff_hx": t["hx"].grad.numpy(),
           "diff_weights": diff_weights,
           "diff_weights_acc": diff_weights + a["weights"].astype(np.float64)}
    if lstm:
        out["cy"] = cy.detach().numpy()
        out["diff_cx"] = t["cx"].grad.numpy()
    return out


def run_case(harness, c, name, directory, rng):
    T, N, C, H = c["seq"], c["batch"], c["input"], c["hidden"]
    D = 2 if c["bidirectional"] else 1
    G = gates(c["cell"])
    count = 0
    for layer in range(c["layers"]):
        inp = C if layer == 0 else D * H
        count += D * (G * H * (inp + H) + (2 * G * H if c["bias"] else 0))
    io = (N, T) if c["batch_first"] else (T, N)
    state = (c["layers"] * D, N, H)
    scale = 1.0 / np.sqrt(H)
    arrays = {
        "src": rng.uniform(-1, 1, io + (C,)).astype(np.float32),
        "weights": rng.uniform(-scale, scale, (count,)).astype(np.float32),
        "hx": rng.uniform(-1, 1, state).astype(np.float32),
        "diff_dst": rng.uniform(-1, 1, io + (D * H,)).astype(np.float32),
        "diff_hy": rng.uniform(-1, 1, state).astype(np.float32),
    }
    if c["cell"] == "lstm":
        arrays["cx"] = rng.uniform(-1, 1, state).astype(np.float32)
        arrays["diff_cy"] = rng.uniform(-1, 1, state).astype(np.float32)
    failure = oracle_common.run_harness(harness, directory, c, arrays)
    if failure:
        return False, [failure]
    want = torch_rnn(c, arrays)
    ok, messages = True, []
    for output, expected in want.items():
        good, message = oracle_common.compare(
            output, oracle_common.load_output(directory, output), expected,
            4 * ULP * np.abs(expected) + 1e-12)
        ok, messages = ok and good, messages + [message]
    return ok, messages


if __name__ == "__main__":
    sys.exit(oracle_common.main(__doc__, "rnn_harness", [(c["name"], c, "") for c in CASES],
                                run_case))
