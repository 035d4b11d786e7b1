#!/usr/bin/env python3
"""The reference pooling against PyTorch (the oracle of the oracle).

    torch_pool_parity.py POOL_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below and every mode (max, max with indices, avg_include_pad,
avg_exclude_pad; max only for dilated cases, as PyTorch's avg_pool has no dilation): numpy draws
float32 inputs, pool_harness runs forward and backward on dnnx's reference backend, and torch
computes the same in float64: F.max_pool{1,2,3}d (dilation, return_indices both ways) and
F.avg_pool{1,2,3}d with ceil_mode and count_include_pad both ways, gradients
through autograd (for max with indices, max_pool*d_with_indices_backward through the saved
indices). PyTorch pads symmetrically; per-side padding (floor mode) goes through F.pad: -inf for
max, zeros for the include-pad average, and for the exclude-pad average the ratio of two
include-pad averages, of the input and of a mask of ones. Indices name positions of the padded
input there, so max with indices runs on the symmetric cases only.

Max inputs are distinct integers within each plane (no ties, so the gradient routing is unique)
and max forward must agree exactly, indices included. Every other output must agree within 4 f32
ulps of its scale, the same computation on |inputs| (for max backward, |diff_dst| routed by the
same src). The tie cases (TIE_CASES, max with indices) draw inputs from {0, 1, 2} with some NaNs:
dst (NaN where torch has NaN) and the indices must match torch's exactly, which pins down
PyTorch's rule (the first maximum in scan order, the last NaN of a window), and the gradient,
routed through those indices, within the bound.

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import sys

import oracle_common
from oracle_common import F, np, torch

TOLERANCE = 4 * 2.0 ** -24
MODES = ("max", "max_indices", "avg_include_pad", "avg_exclude_pad")


def case(name, batch, channels, input, kernel, stride=None, pad=0, ceil=False, layout="nchw",
         dilation=1):
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
        "dilation": spread(dilation),
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
    # Dilated max pooling (symmetric padding; max modes only). Every padding here is also at most
    # half the kernel itself, which PyTorch's max_pool1d without indices and max_pool3d require
    # (and torch before 2.1 everywhere); dnnx accepts up to half the effective kernel.
    case("1d_dilated", 2, 3, (19,), 3, 2, 1, dilation=2),
    case("1d_dilated_ceil_overhang", 1, 2, (20,), 3, 2, 1, ceil=True, dilation=3),
    case("2d_dilated", 2, 3, (13, 11), 3, (2, 1), 1, dilation=(2, 3)),
    case("2d_dilated_ceil_nhwc", 1, 4, (9, 12), (3, 2), 2, (1, 1), ceil=True, layout="nhwc",
         dilation=2),
    case("3d_dilated_ceil", 1, 2, (7, 6, 9), (2, 2, 3), (1, 2, 2), (1, 1, 1), ceil=True,
         dilation=(2, 3, 2)),
]


# Heavy ties and NaNs, max with indices (symmetric padding: torch's indices are then dnnx's).
TIE_CASES = [
    case("ties_1d_overlap", 2, 3, (23,), 3, 1, 1),
    case("ties_2d_resnet_stem", 2, 3, (13, 12), 3, 2, 1),
    case("ties_2d_ceil_nhwc", 1, 4, (9, 10), (3, 2), (2, 2), (1, 1), ceil=True, layout="nhwc"),
    case("ties_3d", 1, 2, (5, 6, 7), 3, 2, 1, ceil=True),
    case("ties_2d_dilated", 2, 3, (11, 10), 3, 2, 1, ceil=True, dilation=2),
]


def output_size(c, i):
    """PoolDesc::output_size: PyTorch's pooling_output_shape with per-side padding."""
    extent = (c["kernel"][i] - 1) * c["dilation"][i] + 1
    span = c["input"][i] + c["pad_before"][i] + c["pad_after"][i] - extent
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
    """dst and diff_src in float64, and for max with indices the indices (int64)."""
    dims = c["spatial_dims"]
    x = torch.tensor(src, dtype=torch.float64, requires_grad=True)
    g = torch.tensor(diff_dst, dtype=torch.float64)
    k, s, d = c["kernel"], c["stride"], c["dilation"]
    assert mode in ("max", "max_indices") or d == [1] * dims, "PyTorch's avg_pool has no dilation"
    max_pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
    avg_pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[dims]
    if mode == "max_indices":
        assert c["pad_before"] == c["pad_after"], "indices are compared on symmetric padding"
        y, indices = max_pool(x, k, s, c["pad_before"], dilation=d, ceil_mode=c["ceil_mode"],
                              return_indices=True)
        y.backward(g)
        return {"dst": y.detach().numpy(), "diff_src": x.grad.numpy(),
                "indices": indices.numpy()}
    if c["pad_before"] == c["pad_after"]:
        p = c["pad_before"]
        if mode == "max":
            y = max_pool(x, k, s, p, dilation=d, ceil_mode=c["ceil_mode"])
        else:
            y = avg_pool(x, k, s, p, ceil_mode=c["ceil_mode"],
                         count_include_pad=mode == "avg_include_pad")
    else:
        assert not c["ceil_mode"], "per-side padding is compared in floor mode only"
        pads = []  # F.pad lists the last dim first
        for i in reversed(range(dims)):
            pads += [c["pad_before"][i], c["pad_after"][i]]
        if mode == "max":
            y = max_pool(F.pad(x, pads, value=float("-inf")), k, s, 0, dilation=d)
        elif mode == "avg_include_pad":
            y = avg_pool(F.pad(x, pads), k, s, 0)
        else:
            ones = torch.ones_like(x, requires_grad=False)
            y = avg_pool(F.pad(x, pads), k, s, 0) / avg_pool(F.pad(ones, pads), k, s, 0)
    y.backward(g)
    return {"dst": y.detach().numpy(), "diff_src": x.grad.numpy()}


def tie_free(rng, shape):
    """Distinct integers within every (n, c) plane."""
    planes = shape[0] * shape[1]
    plane = int(np.prod(shape[2:]))
    values = np.stack([rng.permutation(plane) - plane // 2 for _ in range(planes)])
    return values.reshape(shape).astype(np.float32)


def harness_case(c):
    """The case as pool_harness reads it: mode max_indices is mode max with indices."""
    if c["mode"] == "max_indices":
        return dict(c, mode="max", indices=True)
    return c


def compare_indices(directory, want):
    """(ok, message): the harness's indices equal torch's."""
    got = oracle_common.load_output(directory, "indices").astype(np.int64)
    if got.shape != want.shape:
        return False, f"indices: shape {got.shape} from dnnx, {want.shape} from torch"
    bad = int((got != want).sum())
    if bad == 0:
        return True, "indices: exact"
    at = np.unravel_index(int(np.argmax(got != want)), got.shape)
    return False, (f"indices: {bad} of {got.size} differ (first at {list(at)}: dnnx {got[at]}, "
                   f"torch {want[at]})")


def run_case(harness, c, name, directory, rng):
    mode = c["mode"]
    src_shape, dst_shape = shapes(c)
    max_mode = mode in ("max", "max_indices")
    src = tie_free(rng, src_shape) if max_mode else \
        rng.uniform(-1, 1, src_shape).astype(np.float32)
    diff_dst = rng.uniform(-1, 1, dst_shape).astype(np.float32)
    failure = oracle_common.run_harness(harness, directory, harness_case(c),
                                        {"src": src, "diff_dst": diff_dst})
    if failure:
        return False, [failure]

    want = torch_pool(c, mode, src.astype(np.float64), diff_dst.astype(np.float64))
    scale_src = src if max_mode else np.abs(src)  # max: the same routing
    scale = torch_pool(c, mode, scale_src.astype(np.float64), np.abs(diff_dst).astype(np.float64))
    checks = []
    for output in ("dst", "diff_src"):
        exact = max_mode and output == "dst"
        bound = 0.0 if exact else TOLERANCE * np.abs(scale[output])
        checks.append(oracle_common.compare(output, oracle_common.load_output(directory, output),
                                            want[output], bound))
    if mode == "max_indices":
        checks.append(compare_indices(directory, want["indices"]))
    return all(ok for ok, _ in checks), [message for _, message in checks]


def run_tie_case(harness, c, name, directory, rng):
    """Max with indices on inputs full of ties and NaNs (TIE_CASES)."""
    src_shape, dst_shape = shapes(c)
    src = rng.integers(0, 3, src_shape).astype(np.float32)
    src[rng.random(src_shape) < 0.03] = np.nan
    diff_dst = rng.uniform(-1, 1, dst_shape).astype(np.float32)
    failure = oracle_common.run_harness(harness, directory, harness_case(c),
                                        {"src": src, "diff_dst": diff_dst})
    if failure:
        return False, [failure]
    want = torch_pool(c, "max_indices", src.astype(np.float64), diff_dst.astype(np.float64))
    scale = torch_pool(c, "max_indices", src.astype(np.float64),
                       np.abs(diff_dst).astype(np.float64))
    checks = []
    got = oracle_common.load_output(directory, "dst")
    same = got.shape == want["dst"].shape and np.array_equal(got, want["dst"], equal_nan=True)
    checks.append((same, "dst: exact, NaNs where torch's" if same else
                   f"dst: differs from torch's ({int(np.isnan(got).sum())} NaNs from dnnx, "
                   f"{int(np.isnan(want['dst']).sum())} from torch)"))
    checks.append(compare_indices(directory, want["indices"]))
    checks.append(oracle_common.compare("diff_src",
                                        oracle_common.load_output(directory, "diff_src"),
                                        want["diff_src"], TOLERANCE * np.abs(scale["diff_src"])))
    return all(ok for ok, _ in checks), [message for _, message in checks]


def run_any(harness, c, name, directory, rng):
    runner = run_tie_case if c.get("ties") else run_case
    return runner(harness, {k: v for k, v in c.items() if k != "ties"}, name, directory, rng)


def runs():
    """Every (name, case, note): the table in every mode (max with indices where the padding is
    symmetric, the averages where the windows are dense), then the tie cases."""
    def compared(c, mode):
        if mode == "max_indices" and c["pad_before"] != c["pad_after"]:
            return False
        return mode in ("max", "max_indices") or c["dilation"] == [1] * c["spatial_dims"]

    table = [(f"{c['name']}_{mode}", dict(c, mode=mode), "") for c in CASES for mode in MODES
             if compared(c, mode)]
    ties = [(f"{c['name']}_max_indices", dict(c, mode="max_indices", ties=True), "")
            for c in TIE_CASES]
    return table + ties


if __name__ == "__main__":
    sys.exit(oracle_common.main(__doc__, "pool_harness", runs(), run_any))
