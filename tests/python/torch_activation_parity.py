#!/usr/bin/env python3
"""The reference backend's activations and tensor add against PyTorch (the oracle of the oracle).

    torch_activation_parity.py ACTIVATION_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the tables below numpy draws float32 inputs, activation_harness runs the case on
dnnx's reference backend, and torch computes the same in float64:
  activations  relu, hardtanh(0, ceiling), tanh, sigmoid, elu(alpha), silu and the identity,
               forward and the gradient of sum(dst * diff_dst) by autograd; the inputs include the
               kinks (0, -0, the ceiling), where the derivative is a convention that dnnx follows;
               the harness's backward from dst alone (after an in-place forward) is compared too;
  tensor add   alpha * src + beta * dst with src broadcast, and the gradient w.r.t. src; with
               beta = 0 dst starts as NaN, which must not reach the output.
The reference computes in f64 and rounds each output once to f32, so forward outputs and
gradients from src must agree within 1 f32 ulp of their scale; gradients from dst within a few ulps
of 1 (dst is f(x) rounded to f32) times |diff_dst|; add within 1 ulp of the sum of |terms|.

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import os
import sys

import oracle_common
from oracle_common import F, np, torch

ULP = 2.0 ** -23  # f32 ulp of 1; half of it is the unit roundoff


def act(name, kind, dims, layout="nchw", alpha=1.0, ceiling=6.0):
    return {"name": name, "op": "act", "kind": kind, "dims": list(dims), "layout": layout,
            "alpha": alpha, "ceiling": ceiling}


def add(name, src_dims, dst_dims, layout="nchw", alpha=1.0, beta=1.0):
    return {"name": name, "op": "add", "src_dims": list(src_dims), "dst_dims": list(dst_dims),
            "layout": layout, "alpha": alpha, "beta": beta}


CASES = [
    act("relu_4d", "relu", (2, 3, 5, 7)),
    act("relu_4d_nhwc", "relu", (2, 3, 5, 7), "nhwc"),
    act("identity_1d", "identity", (33,)),
    act("hardtanh_0p5_3d", "clipped_relu", (2, 4, 9), ceiling=0.5),
    act("hardtanh_6_5d_nhwc", "clipped_relu", (2, 3, 2, 3, 4), "nhwc", ceiling=6.0),
    act("tanh_2d", "tanh", (5, 11)),
    act("tanh_4d_batch1_nhwc", "tanh", (1, 6, 5, 5), "nhwc"),
    act("sigmoid_4d", "sigmoid", (2, 3, 4, 5)),
    act("sigmoid_5d_nhwc", "sigmoid", (1, 2, 3, 4, 5), "nhwc"),
    act("elu_1_4d", "elu", (2, 3, 5, 5)),
    act("elu_0p3_3d_nhwc", "elu", (2, 5, 7), "nhwc", alpha=0.3),
    act("elu_neg_2d", "elu", (4, 9), alpha=-0.7),
    act("silu_4d", "swish", (2, 3, 5, 7)),
    act("silu_3d_nhwc", "swish", (3, 4, 5), "nhwc"),
    add("bias_4d", (1, 6, 1, 1), (2, 6, 5, 7)),
    add("bias_4d_nhwc", (1, 6, 1, 1), (2, 6, 5, 7), "nhwc"),
    add("bias_3d_scaled", (1, 4, 1), (3, 4, 9), alpha=0.5, beta=-2.0),
    add("full_2d", (5, 7), (5, 7), alpha=2.0, beta=0.25),
    add("scalar_1d", (1,), (17,)),
    add("same_chw_5d_nhwc", (1, 3, 2, 3, 4), (2, 3, 2, 3, 4), "nhwc"),
    add("same_hw_4d", (1, 1, 5, 6), (3, 4, 5, 6), alpha=-1.0),
    add("mixed_4d_nhwc", (2, 1, 1, 5), (2, 3, 4, 5), "nhwc", beta=0.5),
    add("rows_2d_overwrite", (5, 1), (5, 8), alpha=1.5, beta=0.0),
    add("bias_4d_overwrite_nhwc", (1, 8, 1, 1), (2, 8, 3, 3), "nhwc", beta=0.0),
]


def torch_activation(c, x):
    kind = c["kind"]
    if kind == "identity":
        return x * 1
    if kind == "relu":
        return F.relu(x)
    if kind == "clipped_relu":
        return F.hardtanh(x, 0.0, c["ceiling"])
    if kind == "tanh":
        return torch.tanh(x)
    if kind == "sigmoid":
        return torch.sigmoid(x)
    if kind == "elu":
        return F.elu(x, alpha=c["alpha"])
    if kind == "swish":
        return F.silu(x)
    raise ValueError(kind)


def activation_inputs(c, rng):
    src = rng.uniform(-3, 3, c["dims"]).astype(np.float32)
    flat = src.reshape(-1)
    flat[3::13] = 0.0
    flat[9::13] = -0.0
    if c["kind"] == "clipped_relu":
        flat[5::13] = np.float32(c["ceiling"])
    return {"src": src, "diff_dst": rng.uniform(-1, 1, c["dims"]).astype(np.float32)}


def add_inputs(c, rng):
    dst = rng.uniform(-1, 1, c["dst_dims"]).astype(np.float32)
    if c["beta"] == 0:
        dst[...] = np.nan  # must not be read
    return {"src": rng.uniform(-1, 1, c["src_dims"]).astype(np.float32), "dst": dst,
            "diff_dst": rng.uniform(-1, 1, c["dst_dims"]).astype(np.float32)}


def check_activation(c, inputs, directory):
    x = torch.tensor(inputs["src"].astype(np.float64), requires_grad=True)
    g = torch.tensor(inputs["diff_dst"].astype(np.float64))
    y = torch_activation(c, x)
    y.backward(g)
    want_dst = y.detach().numpy()
    want_grad = x.grad.numpy()
    m = max(1.0, abs(c["alpha"])) if c["kind"] == "elu" else 1.0
    results = [
        oracle_common.compare("dst", oracle_common.load_output(directory, "dst"), want_dst,
                ULP * np.abs(want_dst) + 2.0 ** -149),
        oracle_common.compare("diff_src", oracle_common.load_output(directory, "diff_src"), want_grad,
                ULP * np.abs(want_grad) + 2.0 ** -149),
    ]
    from_dst = os.path.join(directory, "diff_src_from_dst.npy")
    if os.path.exists(from_dst):
        results.append(oracle_common.compare("diff_src_from_dst", np.load(from_dst), want_grad,
                               ULP * np.abs(want_grad) + 8 * ULP * m * np.abs(inputs["diff_dst"])))
    elif c["kind"] != "swish" and not (c["kind"] == "elu" and c["alpha"] < 0):
        results.append((False, "diff_src_from_dst.npy missing although the kind allows it"))
    return results


def check_add(c, inputs, directory):
    src = torch.tensor(inputs["src"].astype(np.float64), requires_grad=True)
    old = torch.tensor(inputs["dst"].astype(np.float64))
    g = torch.tensor(inputs["diff_dst"].astype(np.float64))
    term = c["alpha"] * src.expand(*c["dst_dims"])
    out = term + c["beta"] * old if c["beta"] != 0 else term
    out.backward(g)
    want_out = out.detach().numpy()
    want_grad = src.grad.numpy()
    scale = np.abs(term.detach().numpy())
    if c["beta"] != 0:
        scale = scale + np.abs(c["beta"] * inputs["dst"].astype(np.float64))
    grad_scale = abs(c["alpha"]) * np.abs(inputs["diff_dst"].astype(np.float64))
    grad_scale = np.sum(grad_scale, axis=tuple(i for i, (s, d) in enumerate(
        zip(c["src_dims"], c["dst_dims"])) if s == 1 and d != 1), keepdims=True)
    return [
        oracle_common.compare("out", oracle_common.load_output(directory, "out"), want_out,
                ULP * scale + 2.0 ** -149),
        oracle_common.compare("diff_src", oracle_common.load_output(directory, "diff_src"), want_grad,
                ULP * grad_scale.reshape(want_grad.shape) + 2.0 ** -149),
    ]


def run_case(harness, c, name, directory, rng):
    inputs = activation_inputs(c, rng) if c["op"] == "act" else add_inputs(c, rng)
    failure = oracle_common.run_harness(harness, directory, c, inputs)
    if failure:
        return False, [failure]
    checks = check_activation(c, inputs, directory) if c["op"] == "act" else check_add(
        c, inputs, directory)
    return all(ok for ok, _ in checks), [message for _, message in checks]


if __name__ == "__main__":
    sys.exit(oracle_common.main(__doc__, "activation_harness",
                                [(c["name"], c, "") for c in CASES], run_case))
