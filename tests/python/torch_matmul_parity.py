#!/usr/bin/env python3
"""dnnx's reference matmul against PyTorch (the oracle of the oracle).

    torch_matmul_parity.py MATMUL_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below: numpy draws float32 inputs, matmul_harness runs matmul
forward, backward data and backward weights on dnnx's reference backend, and torch computes the
same in float64: torch.matmul of op(a) and op(b) (transposes as views, a b shared by the batch
broadcast by torch.matmul), or F.linear for linear layers, plus beta times the output's previous
contents and the bias, and autograd for the gradients of sum(dst * diff_dst) w.r.t. a, b and the
bias (the gradient of a shared b summed over the batch by autograd). With an activation, torch
applies F.relu or F.gelu(approximate='tanh') to op(a) op(b) + beta * dst0 + bias and autograd
differentiates through it; dnnx runs fwd_training and both backward passes on its SavedState.
The reference sums in f64 and rounds once to f32, so every element must agree within 4 f32 units
of rounding of its scale, the same expression on absolute values without the activation (16
with one: gelu's state is pre rounded to f32, and its slope is at most 1.13).

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import sys

import oracle_common
from oracle_common import F, np, torch

ULP = 2.0 ** -24


def case(name, batch, m, n, k, ta=False, tb=False, shared=False, bias=False, alpha=1.0,
         beta=0.0, act="none", shared_a=False):
    return {"name": name, "batch": batch, "m": m, "n": n, "k": k, "transpose_a": ta,
            "transpose_b": tb, "broadcast_b": shared, "broadcast_a": shared_a, "bias": bias,
            "alpha": alpha, "beta": beta, "activation": act}


CASES = [
    case("linear", 1, 13, 7, 29, tb=True, bias=True),
    case("linear_acc", 1, 32, 10, 64, tb=True, bias=True, beta=1.0),
    case("nn", 1, 7, 5, 13),
    case("tn_scaled", 1, 7, 5, 13, ta=True, alpha=0.5, beta=-0.25),
    case("tt_bias", 1, 5, 17, 9, ta=True, tb=True, bias=True, alpha=-2.0, beta=0.5),
    case("batched", 3, 17, 9, 33),
    case("batched_tt", 2, 6, 11, 4, ta=True, tb=True, beta=1.0),
    case("shared_linear", 4, 6, 10, 8, tb=True, shared=True, bias=True),
    case("shared_tn", 3, 5, 7, 9, ta=True, shared=True, alpha=0.75),
    case("one", 1, 1, 1, 1, bias=True),
    case("linear_relu", 1, 13, 7, 29, tb=True, bias=True, act="relu"),
    case("linear_gelu", 1, 16, 24, 40, tb=True, bias=True, act="gelu_tanh"),
    case("linear_gelu_acc", 1, 8, 12, 20, tb=True, bias=True, beta=1.0, act="gelu_tanh"),
    case("shared_tn_relu_scaled", 3, 5, 7, 9, ta=True, shared=True, alpha=0.75, act="relu"),
    case("batched_gelu", 2, 6, 11, 4, bias=True, alpha=-1.5, act="gelu_tanh"),
    case("shared_a_nn", 3, 6, 5, 7, shared_a=True),
    case("shared_a_tt_bias_acc", 4, 5, 9, 4, ta=True, tb=True, bias=True, beta=1.0,
         shared_a=True),
]


def dims(c):
    """The stored dims of a, b, dst and bias, as MatmulDesc gives them."""
    def matrix(batch, rows, cols):
        return (batch, rows, cols) if batch > 1 else (rows, cols)
    b_batch = 1 if c["broadcast_b"] else c["batch"]
    a_batch = 1 if c["broadcast_a"] else c["batch"]
    a = matrix(a_batch, c["k"], c["m"]) if c["transpose_a"] else matrix(a_batch, c["m"], c["k"])
    b = matrix(b_batch, c["n"], c["k"]) if c["transpose_b"] else matrix(b_batch, c["k"], c["n"])
    return a, b, matrix(c["batch"], c["m"], c["n"]), (c["n"],)


def torch_matmul(c, a, b, bias, diff_dst, dst0, diff_a0, diff_b0, diff_bias0):
    """Every output in float64: dst, diff_a, diff_b, diff_bias (None without bias)."""
    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    tbias = torch.tensor(bias, dtype=torch.float64, requires_grad=True) if c["bias"] else None
    op_a = ta.transpose(-1, -2) if c["transpose_a"] else ta
    if c["transpose_b"] and not c["transpose_a"] and c["batch"] == 1 and c["alpha"] == 1.0:
        y = F.linear(op_a, tb, tbias)  # a linear layer, as PyTorch users write it
    else:
        op_b = tb.transpose(-1, -2) if c["transpose_b"] else tb
        y = c["alpha"] * torch.matmul(op_a, op_b)
        if tbias is not None:
            y = y + tbias
    beta = c["beta"]
    activation = c.get("activation", "none")
    if activation != "none":
        # The epilogue's input is the whole sum, dst's previous contents included.
        if beta != 0:
            y = y + beta * torch.tensor(dst0, dtype=torch.float64)
        y = F.relu(y) if activation == "relu" else F.gelu(y, approximate="tanh")
    y.backward(torch.tensor(diff_dst, dtype=torch.float64))

    def plus_old(value, old):
        return value + beta * old.astype(np.float64) if beta != 0 else value

    dst = y.detach().numpy() if activation != "none" else plus_old(y.detach().numpy(), dst0)
    diff_a = plus_old(ta.grad.numpy(), diff_a0)
    diff_b = plus_old(tb.grad.numpy(), diff_b0)
    diff_bias = plus_old(tbias.grad.numpy(), diff_bias0) if tbias is not None else None
    return dst, diff_a, diff_b, diff_bias


def run_case(harness, c, name, directory, rng):
    a_dims, b_dims, dst_dims, bias_dims = dims(c)
    arrays = {
        "a": rng.uniform(-1, 1, a_dims).astype(np.float32),
        "b": rng.uniform(-1, 1, b_dims).astype(np.float32),
        "diff_dst": rng.uniform(-1, 1, dst_dims).astype(np.float32),
    }
    # Previous contents of the outputs: NaN when beta = 0 (they must not be read).
    def old(shape):
        if c["beta"] == 0:
            return np.full(shape, np.nan, dtype=np.float32)
        return rng.uniform(-1, 1, shape).astype(np.float32)
    arrays["dst0"] = old(dst_dims)
    arrays["diff_a0"] = old(a_dims)
    arrays["diff_b0"] = old(b_dims)
    if c["bias"]:
        arrays["bias"] = rng.uniform(-1, 1, bias_dims).astype(np.float32)
        arrays["diff_bias0"] = old(bias_dims)
    failure = oracle_common.run_harness(harness, directory, c, arrays)
    if failure:
        return False, [failure]
    get = arrays.get
    want = torch_matmul(c, get("a"), get("b"), get("bias"), get("diff_dst"), get("dst0"),
                        get("diff_a0"), get("diff_b0"), get("diff_bias0"))
    absolute = {key: np.abs(value) if key in ("a", "b", "bias", "diff_dst") else
                (np.zeros_like(value) if c["beta"] == 0 else np.abs(value))
                for key, value in arrays.items()}
    scale_case = dict(c, alpha=abs(c["alpha"]), beta=abs(c["beta"]), activation="none")
    units = 4 if c["activation"] == "none" else 16
    scale = torch_matmul(scale_case, absolute["a"], absolute["b"],
                         absolute.get("bias"), absolute["diff_dst"], absolute["dst0"],
                         absolute["diff_a0"], absolute["diff_b0"], absolute.get("diff_bias0"))
    ok, messages = True, []
    for output, expected, magnitude in zip(("dst", "diff_a", "diff_b", "diff_bias"), want, scale):
        if expected is None:
            continue
        good, message = oracle_common.compare(
            output, oracle_common.load_output(directory, output), expected,
            units * ULP * np.abs(magnitude))
        ok, messages = ok and good, messages + [message]
    return ok, messages


if __name__ == "__main__":
    sys.exit(oracle_common.main(__doc__, "matmul_harness", [(c["name"], c, "") for c in CASES],
                                run_case))
