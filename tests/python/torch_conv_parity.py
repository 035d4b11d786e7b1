#!/usr/bin/env python3
"""The reference backend against PyTorch (the oracle of the oracle).

    torch_conv_parity.py CONV_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below: numpy draws float32 inputs in [-1, 1), conv_harness runs
fwd (with bias), bwd_data and bwd_weights (with diff_bias) on dnnx's reference backend, and torch
computes the same in float64 (torch.nn.functional.conv{1,2,3}d + autograd; asymmetric padding
through F.pad). The reference accumulates in f64 and rounds its f32 output once (bias may add a
second rounding), so every element must agree within 4 f32 ulps of its scale, the sum of
|products| behind it (computed by the same torch graph on absolute values).

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"SKIP: the PyTorch oracle needs torch and numpy ({error}); on Debian: "
          "apt-get install python3-torch python3-numpy", file=sys.stderr)
    sys.exit(SKIP)

# 4 f32 units of rounding, relative to the element's scale.
TOLERANCE = 4 * 2.0 ** -24


def case(name, batch, in_channels, out_channels, input, kernel, stride=1, pad=0, dilation=1,
         groups=1, layout="nchw"):
    """One row; per-spatial-dim fields take a scalar (all dims) or a tuple; pad takes a scalar,
    a tuple (symmetric) or a pair of tuples (before, after)."""
    dims = len(input)

    def spread(value):
        return list(value) if isinstance(value, (tuple, list)) else [value] * dims

    if isinstance(pad, tuple) and len(pad) == 2 and isinstance(pad[0], (tuple, list)):
        pad_before, pad_after = spread(pad[0]), spread(pad[1])
    else:
        pad_before = pad_after = spread(pad)
    return {
        "name": name, "spatial_dims": dims, "batch": batch, "in_channels": in_channels,
        "out_channels": out_channels, "groups": groups, "input": list(input),
        "kernel": spread(kernel), "stride": spread(stride), "pad_before": pad_before,
        "pad_after": pad_after, "dilation": spread(dilation), "layout": layout,
    }


CASES = [
    case("1d_basic", 2, 3, 4, (17,), 3, pad=1),
    case("1d_stride2_dilation2_asym_pad", 2, 4, 6, (23,), 5, stride=2, dilation=2,
         pad=((3,), (1,))),
    case("1d_groups3", 2, 6, 9, (11,), 3, groups=3, pad=((1,), (0,))),
    case("1d_groups3_nhwc", 2, 6, 9, (11,), 3, groups=3, pad=((1,), (0,)), layout="nhwc"),
    case("2d_basic", 2, 3, 4, (8, 8), 3, pad=1),
    case("2d_stride2_odd", 2, 5, 6, (9, 11), 3, stride=2, pad=1),
    case("2d_dilation", 2, 4, 4, (11, 9), 3, dilation=(2, 3), pad=(2, 3)),
    case("2d_asym_pad", 2, 3, 5, (7, 10), (3, 2), pad=((0, 2), (1, 0))),
    case("2d_asym_pad_nhwc", 2, 3, 5, (7, 10), (3, 2), pad=((0, 2), (1, 0)), layout="nhwc"),
    case("2d_groups4", 2, 8, 12, (7, 7), 3, groups=4, pad=1),
    case("2d_depthwise", 2, 8, 8, (10, 10), 3, groups=8, pad=1),
    case("2d_depthwise_multiplier2_stride2", 2, 4, 8, (9, 9), 3, groups=4, stride=2, pad=1),
    case("2d_depthwise_multiplier2_stride2_nhwc", 2, 4, 8, (9, 9), 3, groups=4, stride=2, pad=1,
         layout="nhwc"),
    case("2d_batch1", 1, 5, 3, (13, 7), 3),
    case("2d_pointwise_stride2", 2, 8, 16, (9, 9), 1, stride=2),
    case("2d_kernel_eq_padded_input", 2, 3, 4, (5, 6), (7, 8), pad=1),
    case("2d_stride_gt_kernel", 2, 3, 4, (10, 10), 2, stride=3),
    case("2d_pad_beyond_kernel", 1, 3, 4, (4, 5), 2, pad=((3, 0), (0, 3))),
    case("2d_resnet_conv1_like", 1, 3, 8, (32, 32), 7, stride=2, pad=3),
    case("3d_basic", 2, 3, 4, (5, 6, 7), 3, pad=1),
    case("3d_stride_dilation_asym_pad", 2, 4, 4, (7, 8, 9), (2, 3, 3), stride=(2, 1, 2),
         dilation=(1, 2, 1), pad=((1, 0, 2), (0, 2, 1))),
    case("3d_stride_dilation_asym_pad_nhwc", 2, 4, 4, (7, 8, 9), (2, 3, 3), stride=(2, 1, 2),
         dilation=(1, 2, 1), pad=((1, 0, 2), (0, 2, 1)), layout="nhwc"),
    case("3d_depthwise", 1, 6, 6, (5, 5, 5), 3, groups=6, pad=1),
]


def output_size(c, i):
    extent = c["dilation"][i] * (c["kernel"][i] - 1) + 1
    return (c["input"][i] + c["pad_before"][i] + c["pad_after"][i] - extent) // c["stride"][i] + 1


def shapes(c):
    dims = c["spatial_dims"]
    src = [c["batch"], c["in_channels"]] + c["input"]
    weights = [c["out_channels"], c["in_channels"] // c["groups"]] + c["kernel"]
    dst = [c["batch"], c["out_channels"]] + [output_size(c, i) for i in range(dims)]
    return src, weights, [c["out_channels"]], dst


def torch_conv(c, src, weights, bias, diff_dst):
    """fwd output and the three gradients of sum(dst * diff_dst), in float64."""
    x = torch.tensor(src, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(weights, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(bias, dtype=torch.float64, requires_grad=True)
    g = torch.tensor(diff_dst, dtype=torch.float64)
    pads = []  # F.pad lists the last dim first
    for i in reversed(range(c["spatial_dims"])):
        pads += [c["pad_before"][i], c["pad_after"][i]]
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[c["spatial_dims"]]
    y = conv(F.pad(x, pads), w, b, stride=c["stride"], padding=0, dilation=c["dilation"],
             groups=c["groups"])
    y.backward(g)
    return {"dst": y.detach().numpy(), "diff_src": x.grad.numpy(),
            "diff_weights": w.grad.numpy(), "diff_bias": b.grad.numpy()}


def compare(name, got, want, scale):
    """(ok, message) for one output."""
    if got.shape != want.shape:
        return False, f"{name}: shape {got.shape} from dnnx, {want.shape} from torch"
    error = np.abs(got.astype(np.float64) - want)
    bound = TOLERANCE * scale
    ratio = np.where(bound > 0, error / np.where(bound > 0, bound, 1), np.where(error > 0, np.inf, 0))
    worst = float(ratio.max()) if ratio.size else 0.0
    bad = int((ratio > 1).sum())
    if bad == 0:
        return True, f"{name}: worst {worst:.3f} of the bound"
    at = np.unravel_index(int(ratio.argmax()), ratio.shape)
    return False, (f"{name}: {bad} of {ratio.size} elements outside {TOLERANCE:.3g} * scale "
                   f"(worst {worst:.3g}x at {list(at)}: dnnx {got[at]!r}, torch {want[at]!r}, "
                   f"scale {scale[at]!r})")


def run_case(harness, c, directory, rng):
    src_shape, weights_shape, bias_shape, dst_shape = shapes(c)
    inputs = {
        "src": rng.uniform(-1, 1, src_shape).astype(np.float32),
        "weights": rng.uniform(-1, 1, weights_shape).astype(np.float32),
        "bias": rng.uniform(-1, 1, bias_shape).astype(np.float32),
        "diff_dst": rng.uniform(-1, 1, dst_shape).astype(np.float32),
    }
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "case.json"), "w") as out:
        json.dump({k: v for k, v in c.items() if k != "name"}, out)
    for role, array in inputs.items():
        np.save(os.path.join(directory, role + ".npy"), array)
    result = subprocess.run([harness, directory], capture_output=True, text=True)
    if result.returncode != 0:
        return False, [f"conv_harness exited {result.returncode}: {result.stderr.strip()}"]

    want = torch_conv(c, *(inputs[k].astype(np.float64) for k in ("src", "weights", "bias", "diff_dst")))
    scale = torch_conv(c, *(np.abs(inputs[k]).astype(np.float64)
                            for k in ("src", "weights", "bias", "diff_dst")))
    ok = True
    messages = []
    for name in ("dst", "diff_src", "diff_weights", "diff_bias"):
        got = np.load(os.path.join(directory, name + ".npy"))
        good, message = compare(name, got, want[name], scale[name])
        ok &= good
        messages.append(message)
    return ok, messages


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("harness", help="path of the conv_harness executable")
    parser.add_argument("--keep", help="write the case directories here and keep them")
    parser.add_argument("--case", default="", help="run only cases whose name contains this")
    args = parser.parse_args()
    if not os.access(args.harness, os.X_OK):
        parser.error(f"harness {args.harness!r} is not an executable file")

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    root = args.keep or tempfile.mkdtemp(prefix="dnnx_torch_oracle_")
    failures = []
    cases = [c for c in CASES if args.case in c["name"]]
    for index, c in enumerate(cases):
        rng = np.random.default_rng(1000 + index)
        directory = os.path.join(root, c["name"])
        ok, messages = run_case(args.harness, c, directory, rng)
        print(f"{'ok  ' if ok else 'FAIL'} {c['name']}: " + "; ".join(messages))
        if not ok:
            failures.append(c["name"])
            print(f"     case: {json.dumps(c)}\n     rerun: {args.harness} {directory}"
                  + ("" if args.keep else " (pass --keep DIR to keep the inputs)"))
    if not args.keep:
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(cases) - len(failures)} of {len(cases)} cases agree with torch")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
