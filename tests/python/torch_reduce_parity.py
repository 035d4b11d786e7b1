#!/usr/bin/env python3
"""dnnx's reference reduce, argmax and accuracy against PyTorch (the oracle of the oracle).

    torch_reduce_parity.py REDUCE_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below numpy draws float32 inputs, reduce_harness runs the op on dnnx's
reference backend, and torch computes the same in float64:
  reduce:   torch.sum / mean / amax / amin / linalg.vector_norm (ord 1 and 2) over the axes with
            keepdim, and autograd's gradient of sum(dst * diff_dst) w.r.t. src (amax / amin split
            it evenly among tied maxima, the rule dnnx follows). max and min cases draw inputs
            from a few values, so that ties occur; forward results must then be exact.
  argmax:   torch.argmax(dim, keepdim=True) on inputs with ties: exact (the first index).
  accuracy: the number of positions whose label ranks below k (torch.topk on float64 logits
            with distinct values, plus ignore_index): exact.
Sums and norms must agree within (R + 2) f32 units of rounding of the same expression on |x|.

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import sys

import oracle_common
from oracle_common import np, torch

ULP = 2.0 ** -24


def reduce_case(name, kind, src, axes):
    return {"name": name, "op": "reduce", "kind": kind, "src": list(src), "axes": list(axes)}


CASES = [
    reduce_case("sum_all", "sum", (2, 3, 5, 7), (0, 1, 2, 3)),
    reduce_case("sum_spatial", "sum", (4, 6, 5, 5), (2, 3)),
    reduce_case("mean_batch", "mean", (8, 10), (0,)),
    reduce_case("mean_mixed", "mean", (2, 3, 4, 5, 6), (0, 2, 4)),
    reduce_case("max_rows", "max", (6, 40), (1,)),
    reduce_case("max_channels", "max", (3, 8, 4, 4), (1,)),
    reduce_case("min_all", "min", (5, 9), (0, 1)),
    reduce_case("min_inner", "min", (4, 3, 10), (2,)),
    reduce_case("norm1_rows", "norm1", (7, 13), (1,)),
    reduce_case("norm2_all", "norm2", (3, 4, 5), (0, 1, 2)),
    reduce_case("norm2_cols", "norm2", (9, 6), (0,)),
    reduce_case("sum_none", "sum", (3, 4), ()),
    {"name": "argmax_classes", "op": "argmax", "src": [16, 10], "axis": 1},
    {"name": "argmax_channels", "op": "argmax", "src": [2, 6, 3, 4], "axis": 1},
    {"name": "argmax_batch", "op": "argmax", "src": [7, 5], "axis": 0},
    {"name": "accuracy_top1", "op": "accuracy", "src": [64, 10], "top_k": 1, "ignore_index": -100},
    {"name": "accuracy_top5", "op": "accuracy", "src": [32, 100], "top_k": 5,
     "ignore_index": -100},
    {"name": "accuracy_spatial", "op": "accuracy", "src": [4, 7, 3, 3], "top_k": 2,
     "ignore_index": 0},
]

KEEPDIM = {"keepdim": True}


def torch_reduce(c, src, diff_dst):
    x = torch.tensor(src, dtype=torch.float64, requires_grad=True)
    dims = tuple(c["axes"])
    kind = c["kind"]
    if not dims:
        y = x.abs() if kind.startswith("norm") else x * 1.0
    elif kind == "sum":
        y = torch.sum(x, dim=dims, **KEEPDIM)
    elif kind == "mean":
        y = torch.mean(x, dim=dims, **KEEPDIM)
    elif kind == "max":
        y = torch.amax(x, dim=dims, **KEEPDIM)
    elif kind == "min":
        y = torch.amin(x, dim=dims, **KEEPDIM)
    else:
        y = torch.linalg.vector_norm(x, ord=1 if kind == "norm1" else 2, dim=dims, **KEEPDIM)
    y.backward(torch.tensor(diff_dst, dtype=torch.float64))
    return y.detach().numpy(), x.grad.numpy()


def run_reduce(harness, c, directory, rng):
    src_shape = tuple(c["src"])
    dst_shape = tuple(1 if i in c["axes"] else s for i, s in enumerate(src_shape))
    if c["kind"] in ("max", "min"):
        src = (rng.integers(-3, 4, src_shape) * 0.5).astype(np.float32)
    else:
        src = rng.uniform(-1, 1, src_shape).astype(np.float32)
    diff_dst = rng.uniform(-1, 1, dst_shape).astype(np.float32)
    failure = oracle_common.run_harness(harness, directory, c, {"src": src, "diff_dst": diff_dst})
    if failure:
        return False, [failure]
    dst, diff_src = torch_reduce(c, src, diff_dst)
    count = max(1, int(np.prod(src_shape) // np.prod(dst_shape)))
    if c["kind"] in ("max", "min"):
        dst_bound = np.zeros_like(dst)
    elif c["kind"] == "norm2":
        dst_bound = (count + 2) * ULP * np.abs(dst)
    else:
        scale_case = dict(c, kind="mean" if c["kind"] == "mean" else "sum")
        dst_bound = (count + 2) * ULP * np.abs(torch_reduce(scale_case, np.abs(src), diff_dst)[0])
    grad_bound = 4 * ULP * np.abs(diff_src)
    ok1, m1 = oracle_common.compare("dst", oracle_common.load_output(directory, "dst"), dst,
                                    dst_bound)
    ok2, m2 = oracle_common.compare("diff_src", oracle_common.load_output(directory, "diff_src"),
                                    diff_src, grad_bound)
    return ok1 and ok2, [m1, m2]


def run_argmax(harness, c, directory, rng):
    src = (rng.integers(-2, 3, tuple(c["src"])) * 1.0).astype(np.float32)
    failure = oracle_common.run_harness(harness, directory, c, {"src": src})
    if failure:
        return False, [failure]
    want = torch.argmax(torch.tensor(src, dtype=torch.float64), dim=c["axis"], keepdim=True)
    return oracle_common.compare("indices", oracle_common.load_output(directory, "indices"),
                                 want.numpy().astype(np.float64), 0)


def run_accuracy(harness, c, directory, rng):
    shape = tuple(c["src"])
    classes = shape[1]
    # Distinct values: torch.topk's order among ties is unspecified.
    src = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float32)
    labels_shape = (shape[0],) + shape[2:]
    labels = rng.integers(0, classes, labels_shape)
    labels[rng.uniform(size=labels_shape) < 0.2] = c["ignore_index"]
    failure = oracle_common.run_harness(harness, directory, c,
                                        {"src": src, "labels": labels.astype(np.float32)})
    if failure:
        return False, [failure]
    logits = torch.tensor(src, dtype=torch.float64).movedim(1, -1).reshape(-1, classes)
    flat = torch.tensor(labels).reshape(-1)
    top = torch.topk(logits, c["top_k"], dim=1).indices
    kept = flat != c["ignore_index"]
    hits = (top[kept] == flat[kept].unsqueeze(1)).any(dim=1).sum().item()
    return oracle_common.compare("count", oracle_common.load_output(directory, "count"),
                                 np.array([float(hits)]), 0)


def run_case(harness, c, name, directory, rng):
    if c["op"] == "reduce":
        return run_reduce(harness, c, directory, rng)
    ok, message = (run_argmax if c["op"] == "argmax" else run_accuracy)(harness, c, directory, rng)
    return ok, [message]


if __name__ == "__main__":
    sys.exit(oracle_common.main(__doc__, "reduce_harness", [(c["name"], c, "") for c in CASES],
                                run_case))
