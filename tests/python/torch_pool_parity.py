#!/usr/bin/env python3
"""The reference pooling against PyTorch (the oracle of the oracle).

    torch_pool_parity.py POOL_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below and every mode (max, avg_include_pad, avg_exclude_pad): numpy
draws float32 inputs, pool_harness runs forward and backward on dnnx's reference backend, and torch
computes the same in float64: F.max_pool{1,2,3}d and F.avg_pool{1,2,3}d with ceil_mode and
count_include_pad both ways, gradients through autograd. PyTorch pads symmetrically; per-side
padding (floor mode) goes through F.pad: -inf for max, zeros for the include-pad average, and for
the exclude-pad average the ratio of two include-pad averages, of the input and of a mask of ones.

Max inputs are distinct integers within each plane (no ties, so the gradient routing is unique)
and max forward must agree exactly. Every other output must agree within 4 f32 ulps of its scale,
the same computation on |inputs| (for max backward, |diff_dst| routed by the same src).

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import argparse
import json
import os
import shutil
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

TOLERANCE = 4 * 2.0 ** -24
MODES = ("max", "avg_include_pad", "avg_exclude_pad")


def case(name, batch, channels, input, kernel, stride=None, pad=0, ceil=False, layout="nchw"):
    """One row; per-spatial-dim fields take a scalar or a tuple; pad takes a scalar, a tuple
    (symmetric) or a pair of tuples (before, after); stride defaults to the kernel."""
    dims = len(input)

    def spread(value):
        return list(value) if isinstance(value, (tuple, list)) else [value] * dims

    if isinstance(pad, tuple) and len(pad) == 2 and isinstance(pad[0], (tuple, list)):
        pad_before, pad_after = spread(pad[0]), spread(pad[1])
    else:
        pad_before = pad_after = spread(pad)
    kernel = spread(kernel)
    return {
        "name": name, "spatial_dims": dims, "batch": batch, "channels": channels,
        "input": list(input), "kernel": kernel, "stride": spread(stride) if stride else kernel,
        "pad_before": pad_before, "pad_after": pad_after, "ceil_mode": ceil, "layout": layout,
    }


CASES = [
    case("1d_k3s2p1", 2, 3, (17,), 3, 2, 1),
    case("1d_ceil", 2, 3, (10,), 3, 2, 0, ceil=True),
    case("1d_ceil_start_rule", 1, 2, (5,), 3, 3, 1, ceil=True),
    case("1d_asym_pad_nhwc", 2, 3, (11,), 4, 3, ((2,), (1,)), layout="nhwc"),
    case("2d_resnet_stem", 2, 4, (16, 16), 3, 2, 1),
    case("2d_resnet_stem_ceil", 2, 4, (16, 16), 3, 2, 1, ceil=True),
    case("2d_ceil_overhang", 1, 3, (7, 10), 3, 2, 0, ceil=True),
    case("2d_ceil_start_rule_nhwc", 2, 3, (5, 6), 2, 2, 1, ceil=True, layout="nhwc"),
    case("2d_k2s2", 2, 3, (8, 9), 2),
    case("2d_stride_gt_kernel", 1, 2, (10, 11), 2, 3),
    case("2d_rect_kernel", 2, 2, (9, 11), (3, 2), (2, 1), (1, 0)),
    case("2d_half_kernel_pad", 1, 3, (4, 5), 4, 1, 2),
    case("2d_half_kernel_pad_ceil", 1, 2, (6, 7), 4, 3, 2, ceil=True),
    case("2d_asym_pad", 2, 3, (9, 8), (3, 4), (2, 1), ((0, 2), (1, 1))),
    case("2d_asym_pad_nhwc", 1, 4, (7, 7), 3, 2, ((1, 0), (0, 1)), layout="nhwc"),
    case("2d_kernel_eq_input", 2, 3, (5, 6), (5, 6), 1),
    case("3d_k3s2p1", 1, 3, (5, 6, 7), 3, 2, 1),
    case("3d_ceil_nhwc", 2, 2, (6, 5, 7), (2, 3, 3), (2, 1, 2), (1, 0, 1), ceil=True,
         layout="nhwc"),
    case("3d_asym_pad", 1, 2, (6, 5, 7), (2, 3, 3), (2, 1, 2), ((1, 0, 1), (0, 1, 0))),
]


def output_size(c, i):
    """PoolDesc::output_size: PyTorch's pooling_output_shape with per-side padding."""
    span = c["input"][i] + c["pad_before"][i] + c["pad_after"][i] - c["kernel"][i]
    stride = c["stride"][i]
    if not c["ceil_mode"]:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= c["input"][i] + c["pad_before"][i]:
        out -= 1
    return out


def shapes(c):
    src = [c["batch"], c["channels"]] + c["input"]
    dst = [c["batch"], c["channels"]] + [output_size(c, i) for i in range(c["spatial_dims"])]
    return src, dst


def torch_pool(c, mode, src, diff_dst):
    """dst and diff_src in float64."""
    dims = c["spatial_dims"]
    x = torch.tensor(src, dtype=torch.float64, requires_grad=True)
    g = torch.tensor(diff_dst, dtype=torch.float64)
    k, s = c["kernel"], c["stride"]
    max_pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
    avg_pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[dims]
    if c["pad_before"] == c["pad_after"]:
        p = c["pad_before"]
        if mode == "max":
            y = max_pool(x, k, s, p, ceil_mode=c["ceil_mode"])
        else:
            y = avg_pool(x, k, s, p, ceil_mode=c["ceil_mode"],
                         count_include_pad=mode == "avg_include_pad")
    else:
        assert not c["ceil_mode"], "per-side padding is compared in floor mode only"
        pads = []  # F.pad lists the last dim first
        for i in reversed(range(dims)):
            pads += [c["pad_before"][i], c["pad_after"][i]]
        if mode == "max":
            y = max_pool(F.pad(x, pads, value=float("-inf")), k, s, 0)
        elif mode == "avg_include_pad":
            y = avg_pool(F.pad(x, pads), k, s, 0)
        else:
            ones = torch.ones_like(x, requires_grad=False)
            y = avg_pool(F.pad(x, pads), k, s, 0) / avg_pool(F.pad(ones, pads), k, s, 0)
    y.backward(g)
    return {"dst": y.detach().numpy(), "diff_src": x.grad.numpy()}


def compare(name, got, want, scale, exact):
    if got.shape != want.shape:
        return False, f"{name}: shape {got.shape} from dnnx, {want.shape} from torch"
    error = np.abs(got.astype(np.float64) - want)
    bound = np.zeros_like(scale) if exact else TOLERANCE * scale
    ratio = np.where(bound > 0, error / np.where(bound > 0, bound, 1),
                     np.where(error > 0, np.inf, 0))
    worst = float(ratio.max()) if ratio.size else 0.0
    bad = int((ratio > 1).sum())
    if bad == 0:
        return True, f"{name}: {'exact' if exact else f'worst {worst:.3f} of the bound'}"
    at = np.unravel_index(int(ratio.argmax()), ratio.shape)
    return False, (f"{name}: {bad} of {ratio.size} elements outside the bound (worst {worst:.3g}x "
                   f"at {list(at)}: dnnx {got[at]!r}, torch {want[at]!r}, scale {scale[at]!r})")


def tie_free(rng, shape):
    """Distinct integers within every (n, c) plane."""
    planes = shape[0] * shape[1]
    plane = int(np.prod(shape[2:]))
    values = np.stack([rng.permutation(plane) - plane // 2 for _ in range(planes)])
    return values.reshape(shape).astype(np.float32)


def run_case(harness, c, mode, directory, rng):
    src_shape, dst_shape = shapes(c)
    src = tie_free(rng, src_shape) if mode == "max" else \
        rng.uniform(-1, 1, src_shape).astype(np.float32)
    diff_dst = rng.uniform(-1, 1, dst_shape).astype(np.float32)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "case.json"), "w") as out:
        json.dump(dict({k: v for k, v in c.items() if k != "name"}, mode=mode), out)
    np.save(os.path.join(directory, "src.npy"), src)
    np.save(os.path.join(directory, "diff_dst.npy"), diff_dst)
    result = subprocess.run([harness, directory], capture_output=True, text=True)
    if result.returncode != 0:
        return False, [f"pool_harness exited {result.returncode}: {result.stderr.strip()}"]

    want = torch_pool(c, mode, src.astype(np.float64), diff_dst.astype(np.float64))
    scale_src = src if mode == "max" else np.abs(src)  # max: the same routing
    scale = torch_pool(c, mode, scale_src.astype(np.float64), np.abs(diff_dst).astype(np.float64))
    ok = True
    messages = []
    for name in ("dst", "diff_src"):
        got = np.load(os.path.join(directory, name + ".npy"))
        good, message = compare(name, got, want[name], np.abs(scale[name]),
                                exact=mode == "max" and name == "dst")
        ok &= good
        messages.append(message)
    return ok, messages


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("harness", help="path of the pool_harness executable")
    parser.add_argument("--keep", help="write the case directories here and keep them")
    parser.add_argument("--case", default="", help="run only cases whose name contains this")
    args = parser.parse_args()
    if not os.access(args.harness, os.X_OK):
        parser.error(f"harness {args.harness!r} is not an executable file")

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    root = args.keep or tempfile.mkdtemp(prefix="dnnx_torch_pool_oracle_")
    failures = []
    runs = [(c, mode) for c in CASES for mode in MODES if args.case in c["name"]]
    for index, (c, mode) in enumerate(runs):
        rng = np.random.default_rng(2000 + index)
        name = f"{c['name']}_{mode}"
        directory = os.path.join(root, name)
        ok, messages = run_case(args.harness, c, mode, directory, rng)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: " + "; ".join(messages))
        if not ok:
            failures.append(name)
            print(f"     case: {json.dumps(c)} mode {mode}\n     rerun: {args.harness} {directory}"
                  + ("" if args.keep else " (pass --keep DIR to keep the inputs)"))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(runs) - len(failures)} of {len(runs)} cases agree with torch")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
