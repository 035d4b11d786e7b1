#!/usr/bin/env python3
"""dnnx's reference batch normalization against PyTorch (the oracle of the oracle).

    torch_bnorm_parity.py BNORM_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below: numpy draws float32 inputs, bnorm_harness runs `steps`
forwards on dnnx's reference backend (carrying the running statistics) and a backward of the last
step, and torch does the same in float64 with torch.nn.functional.batch_norm (training=True
updates running_mean / running_var in place with PyTorch's momentum rule and the unbiased batch
variance; training=False is eval mode) and autograd. BatchNorm1d on N x F and per-activation
cases on N x C x spatial run as batch_norm on src flattened to N x (C*spatial); spatial cases as
BatchNorm1d/2d/3d on the tensor itself.

The reference computes in f64 from the same f32 inputs and rounds each output once, so every
element must agree within 8 f32 units of rounding of its error scale (Note [batch-norm
tolerances] in tests/ops/batch_norm_cases.cpp), and the running statistics within 4 units per step
(they are stored in f32 between steps).

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import sys

import oracle_common
from oracle_common import F, np, torch

ULP = 2.0 ** -24


def case(name, dims, mode="spatial", training=True, affine=True, eps=1e-5, momentum=0.1,
         layout="nchw", steps=1):
    return {"name": name, "dims": list(dims), "mode": mode, "training": training,
            "affine": affine, "eps": eps, "momentum": momentum, "layout": layout, "steps": steps}


CASES = [
    # BatchNorm1d on N x F (per-activation; rank 2 spatial is the same computation).
    case("bn1d_nf_train_3_steps", (8, 5), mode="per_activation", steps=3),
    case("bn1d_nf_spatial_train", (6, 4), steps=2, momentum=0.3),
    case("bn1d_nf_eval", (7, 5), mode="per_activation", training=False),
    # BatchNorm1d on N x C x L.
    case("bn1d_ncl_train_4_steps", (4, 3, 7), steps=4),
    case("bn1d_ncl_train_nhwc", (4, 3, 7), steps=2, layout="nhwc", eps=1e-3),
    case("bn1d_ncl_eval_no_affine", (3, 2, 5), training=False, affine=False),
    # BatchNorm2d.
    case("bn2d_train_3_steps", (3, 4, 5, 6), steps=3, momentum=0.2, eps=1e-3),
    case("bn2d_train_nhwc", (2, 5, 3, 4), steps=2, layout="nhwc"),
    case("bn2d_train_no_affine", (3, 4, 3, 3), steps=2, affine=False),
    case("bn2d_train_batch1", (1, 3, 4, 4), steps=2),
    case("bn2d_train_momentum_1", (2, 3, 3, 2), steps=2, momentum=1.0),
    case("bn2d_train_momentum_0", (2, 3, 3, 2), steps=2, momentum=0.0),
    case("bn2d_eval", (3, 4, 5, 6), training=False),
    case("bn2d_eval_nhwc_batch1", (1, 6, 3, 5), training=False, layout="nhwc"),
    # BatchNorm3d.
    case("bn3d_train_2_steps", (2, 3, 2, 3, 4), steps=2),
    case("bn3d_eval_nhwc", (2, 3, 2, 3, 4), training=False, layout="nhwc"),
    # Per-activation on N x C x spatial (cuDNN's PER_ACTIVATION).
    case("per_activation_4d_train", (5, 3, 2, 2), mode="per_activation", steps=2),
    case("per_activation_4d_train_nhwc", (5, 3, 2, 2), mode="per_activation", steps=2,
         layout="nhwc"),
    case("per_activation_3d_eval", (4, 2, 3), mode="per_activation", training=False),
]


def param_shape(c):
    return [c["dims"][1]] if c["mode"] == "spatial" else [1] + c["dims"][1:]


def as_ncs(c, x):
    """x (logical N, C, spatial...) viewed as N x K x S: the statistics' view."""
    n = c["dims"][0]
    if c["mode"] == "spatial":
        return x.reshape(n, c["dims"][1], -1)
    return x.reshape(n, -1, 1)


def torch_bnorm(c, srcs, diff_dst, scale, shift, running_mean, running_var):
    """Every output of the harness, from torch in float64."""
    t = lambda a, grad=False: torch.tensor(a, dtype=torch.float64, requires_grad=grad)
    rm = t(running_mean.reshape(-1))
    rv = t(running_var.reshape(-1))
    w = t(scale.reshape(-1), True) if c["affine"] else None
    b = t(shift.reshape(-1), True) if c["affine"] else None

    def flat(x):
        return x if c["mode"] == "spatial" else x.reshape(x.shape[0], -1)

    for src in srcs[:-1]:
        with torch.no_grad():
            F.batch_norm(flat(t(src)), rm, rv, w, b, training=c["training"],
                         momentum=c["momentum"], eps=c["eps"])
    x = t(srcs[-1], True)
    y = F.batch_norm(flat(x), rm, rv, w, b, training=c["training"], momentum=c["momentum"],
                     eps=c["eps"])
    y.backward(flat(t(diff_dst)))
    shape = param_shape(c)
    out = {"dst": y.detach().numpy().reshape(x.shape), "diff_src": x.grad.numpy(),
           "running_mean_out": rm.detach().numpy().reshape(shape),
           "running_var_out": rv.detach().numpy().reshape(shape)}
    if c["affine"]:
        out["diff_scale"] = w.grad.numpy().reshape(shape)
        out["diff_shift"] = b.grad.numpy().reshape(shape)
    if c["training"]:
        v = as_ncs(c, srcs[-1].astype(np.float64))
        mean = v.mean(axis=(0, 2))
        var = v.var(axis=(0, 2))
        out["saved_mean"] = mean.reshape(shape)
        out["saved_inv_std"] = (1 / np.sqrt(var + c["eps"])).reshape(shape)
    return out


def error_scales(c, srcs, diff_dst, scale, shift, running_mean, running_var):
    """Per-element error scales (Note [batch-norm tolerances]), float64."""
    x = as_ncs(c, srcs[-1].astype(np.float64))
    dy = as_ncs(c, diff_dst.astype(np.float64))
    k = x.shape[1]
    g = scale.reshape(-1).astype(np.float64) if c["affine"] else np.ones(k)
    b = shift.reshape(-1).astype(np.float64) if c["affine"] else np.zeros(k)
    rm0 = running_mean.reshape(-1).astype(np.float64)
    rv0 = running_var.reshape(-1).astype(np.float64)
    n = x.shape[0] * x.shape[2]
    if c["training"]:
        mean = x.mean(axis=(0, 2))
        var = x.var(axis=(0, 2))
    else:
        mean, var = rm0, rv0
    inv = 1 / np.sqrt(var + c["eps"])
    bc = lambda a: a[None, :, None]
    x_hat = np.abs((x - bc(mean)) * bc(inv))
    a = np.abs(g * inv)
    sum_dy = np.abs(dy).sum(axis=(0, 2))
    sum_dy_xhat = (np.abs(dy) * x_hat).sum(axis=(0, 2))
    if c["training"]:
        dx = bc(a) * (np.abs(dy) + bc(sum_dy / n) + x_hat * bc(sum_dy_xhat / n))
    else:
        dx = bc(a) * np.abs(dy)
    shape = param_shape(c)
    full = lambda v: v.reshape(srcs[-1].shape)
    # Running statistics: the largest magnitude any step fed them.
    sq = max((as_ncs(c, s.astype(np.float64)) ** 2).mean(axis=(0, 2)).max() for s in srcs)
    mabs = max(np.abs(as_ncs(c, s.astype(np.float64))).mean(axis=(0, 2)).max() for s in srcs)
    out = {"dst": full(x_hat * bc(np.abs(g)) + bc(np.abs(b) + np.abs(g))),
           "diff_src": full(dx),
           "running_mean_out": (np.abs(rm0) + mabs).reshape(shape),
           "running_var_out": (np.abs(rv0) + sq * n / max(n - 1, 1)).reshape(shape),
           "diff_scale": sum_dy_xhat.reshape(shape), "diff_shift": sum_dy.reshape(shape)}
    if c["training"]:
        m2 = (x ** 2).mean(axis=(0, 2))
        out["saved_mean"] = np.abs(x).mean(axis=(0, 2)).reshape(shape)
        out["saved_inv_std"] = (inv * m2 / (var + c["eps"])).reshape(shape)
    return out


def run_case(harness, c, name, directory, rng):
    dims = c["dims"]
    shape = param_shape(c)
    srcs = [rng.uniform(-1, 3, dims).astype(np.float32) for _ in range(c["steps"])]
    inputs = {
        "diff_dst": rng.uniform(-1, 1, dims).astype(np.float32),
        "scale": rng.uniform(0.5, 1.5, shape).astype(np.float32),
        "shift": rng.uniform(-1, 1, shape).astype(np.float32),
        "running_mean": rng.uniform(-0.5, 0.5, shape).astype(np.float32),
        "running_var": rng.uniform(0.5, 1.5, shape).astype(np.float32),
    }
    arrays = {f"src_{i}": src for i, src in enumerate(srcs)}
    arrays.update({role: array for role, array in inputs.items()
                   if c["affine"] or role not in ("scale", "shift")})
    failure = oracle_common.run_harness(harness, directory, c, arrays)
    if failure:
        return False, [failure]

    args = (c, srcs, inputs["diff_dst"], inputs["scale"], inputs["shift"], inputs["running_mean"],
            inputs["running_var"])
    want = torch_bnorm(*args)
    scale = error_scales(*args)
    ok = True
    messages = []
    for output in want:
        units = 4 * (c["steps"] + 1) if output.startswith("running") else 8
        got = oracle_common.load_output(directory, output)
        good, message = oracle_common.compare(output, got, want[output],
                                              units * ULP * scale[output])
        ok &= good
        messages.append(message)
    return ok, messages


if __name__ == "__main__":
    sys.exit(oracle_common.main(__doc__, "bnorm_harness", [(c["name"], c, "") for c in CASES],
                                run_case))
