#!/usr/bin/env python3
"""The reference cross-entropy against PyTorch (the oracle of the oracle).

    torch_xent_parity.py XENT_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below: numpy draws float32 logits, integer labels (some of them
ignore_index), class weights and the loss gradient; xent_harness runs the forward (loss) and the
backward (diff_logits) on dnnx's reference backend, and torch computes the same in float64 with
torch.nn.functional.cross_entropy(weight=, ignore_index=, reduction=) and autograd. Spatial
logits N x C x D x H x W with N x D x H x W labels are PyTorch's K-dimensional cross-entropy.

The reference works in f64 and rounds its f32 outputs once: the loss must agree within 8 f32 ulps
of w * (|log-sum-exp| + |x_y|) (summed, and divided by the weight total for mean), and the
gradient within 8 ulps of |g| * (p + onehot). A mean over no position is NaN on both sides.

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

TOLERANCE = 8 * 2.0 ** -24


def case(name, dims, reduction="mean", ignore_index=-100, weighted=False, label_dtype="i64",
         layout="nchw", magnitude=4.0, ignored=0.2):
    return {"name": name, "dims": list(dims), "reduction": reduction,
            "ignore_index": ignore_index, "weighted": weighted, "label_dtype": label_dtype,
            "layout": layout, "magnitude": magnitude, "ignored": ignored}


CASES = []
for _reduction in ("mean", "sum", "none"):
    CASES += [
        case(f"2d_{_reduction}", (6, 11), _reduction),
        case(f"2d_weighted_{_reduction}", (6, 11), _reduction, weighted=True),
        case(f"2d_ignore_class_{_reduction}", (8, 4), _reduction, ignore_index=2, weighted=True),
        case(f"1d_{_reduction}", (2, 5, 9), _reduction, weighted=True, label_dtype="i32"),
        case(f"2d_spatial_nhwc_{_reduction}", (2, 3, 7, 5), _reduction, ignore_index=255,
             layout="nhwc"),
        case(f"3d_{_reduction}", (2, 4, 3, 5, 6), _reduction, weighted=True),
        case(f"large_{_reduction}", (4, 17), _reduction, weighted=True, magnitude=1e4),
    ]
CASES += [
    case("batch1_1000", (1, 1000)),
    case("one_class", (5, 1), "sum", weighted=True),
    case("all_ignored_mean", (3, 4), "mean", ignored=1.0),
    case("all_ignored_weighted_sum", (3, 4), "sum", weighted=True, ignored=1.0),
    case("large_spatial", (2, 6, 4, 4), "mean", magnitude=1e4, layout="nhwc"),
]


def draw(c, rng):
    dims = c["dims"]
    labels_shape = [dims[0]] + dims[2:]
    loss_shape = labels_shape if c["reduction"] == "none" else [1]
    logits = rng.uniform(-c["magnitude"], c["magnitude"], dims).astype(np.float32)
    labels = rng.integers(0, dims[1], labels_shape)
    labels = np.where(rng.uniform(0, 1, labels_shape) < c["ignored"], c["ignore_index"], labels)
    return {
        "logits": logits,
        "labels": labels.astype(np.float32),
        "weights": rng.uniform(0.25, 2.0, [dims[1]]).astype(np.float32),
        "diff_loss": rng.uniform(0.5, 1.5, loss_shape).astype(np.float32),
    }


def torch_xent(c, inputs, absolute=False):
    """(loss, diff_logits) in float64; with `absolute`, the error scales instead."""
    x = torch.tensor(inputs["logits"], dtype=torch.float64, requires_grad=True)
    y = torch.tensor(inputs["labels"].astype(np.int64))
    w = torch.tensor(inputs["weights"], dtype=torch.float64) if c["weighted"] else None
    g = torch.tensor(inputs["diff_loss"], dtype=torch.float64)
    loss = F.cross_entropy(x, y, weight=w, ignore_index=c["ignore_index"],
                           reduction=c["reduction"])
    if c["reduction"] == "none":
        loss.backward(g)
        loss_out = loss.detach().numpy()
    else:
        loss.backward(g[0])
        loss_out = loss.detach().numpy().reshape(1)
    if not absolute:
        return loss_out, x.grad.numpy()
    # Scales: per position w * (|lse| + |x_y|); per element |grad| bound |g| * (p + onehot).
    with torch.no_grad():
        lse = torch.logsumexp(x, dim=1)
        valid = y != c["ignore_index"]
        safe = torch.where(valid, y, torch.zeros_like(y))
        xy = torch.gather(x, 1, safe.unsqueeze(1)).squeeze(1)
        wy = w[safe] if w is not None else torch.ones_like(lse)
        wy = torch.where(valid, wy, torch.zeros_like(wy))
        per = wy * (lse.abs() + xy.abs())
        if c["reduction"] == "none":
            loss_scale = per.numpy()
            gp = wy * g
        else:
            total = per.sum()
            loss_scale = (total / wy.sum() if c["reduction"] == "mean" else total).numpy().reshape(1)
            gp = wy * g[0] / (wy.sum() if c["reduction"] == "mean" else 1.0)
        p = torch.softmax(x, dim=1)
        onehot = torch.zeros_like(p).scatter_(1, safe.unsqueeze(1), 1.0)
        gp = gp.unsqueeze(1)
        grad_scale = (gp.abs() * (p + onehot)).numpy()
    return loss_scale, grad_scale


def compare(name, got, want, scale):
    if got.shape != want.shape:
        return False, f"{name}: shape {got.shape} from dnnx, {want.shape} from torch"
    nan_want = np.isnan(want)
    if (np.isnan(got) != nan_want).any():
        at = np.argwhere(np.isnan(got) != nan_want)[0].tolist()
        return False, f"{name}: NaN mismatch at {at}: dnnx {got[tuple(at)]!r}, torch {want[tuple(at)]!r}"
    error = np.where(nan_want, 0.0, np.abs(got.astype(np.float64) - np.nan_to_num(want)))
    bound = TOLERANCE * np.nan_to_num(scale) + 1e-30
    ratio = error / bound
    worst = float(ratio.max()) if ratio.size else 0.0
    bad = int((ratio > 1).sum())
    if bad == 0:
        return True, f"{name}: worst {worst:.3f} of the bound"
    at = np.unravel_index(int(ratio.argmax()), ratio.shape)
    return False, (f"{name}: {bad} of {ratio.size} elements outside {TOLERANCE:.3g} * scale "
                   f"(worst {worst:.3g}x at {list(at)}: dnnx {got[at]!r}, torch {want[at]!r})")


def run_case(harness, c, directory, rng):
    inputs = draw(c, rng)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "case.json"), "w") as out:
        json.dump({k: c[k] for k in ("dims", "reduction", "ignore_index", "weighted",
                                     "label_dtype", "layout")}, out)
    for role, array in inputs.items():
        np.save(os.path.join(directory, role + ".npy"), array)
    result = subprocess.run([harness, directory], capture_output=True, text=True)
    if result.returncode != 0:
        return False, [f"xent_harness exited {result.returncode}: {result.stderr.strip()}"]
    want_loss, want_grad = torch_xent(c, inputs)
    loss_scale, grad_scale = torch_xent(c, inputs, absolute=True)
    ok_loss, message_loss = compare("loss", np.load(os.path.join(directory, "loss.npy")),
                                    want_loss, loss_scale)
    ok_grad, message_grad = compare("diff_logits",
                                    np.load(os.path.join(directory, "diff_logits.npy")),
                                    want_grad, grad_scale)
    return ok_loss and ok_grad, [message_loss, message_grad]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("harness", help="path of the xent_harness executable")
    parser.add_argument("--keep", help="write the case directories here and keep them")
    parser.add_argument("--case", default="", help="run only cases whose name contains this")
    args = parser.parse_args()
    if not os.access(args.harness, os.X_OK):
        parser.error(f"harness {args.harness!r} is not an executable file")

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    root = args.keep or tempfile.mkdtemp(prefix="dnnx_torch_xent_")
    failures = []
    cases = [c for c in CASES if args.case in c["name"]]
    for index, c in enumerate(cases):
        rng = np.random.default_rng(3000 + index)
        directory = os.path.join(root, c["name"])
        ok, messages = run_case(args.harness, c, directory, rng)
        print(f"{'ok  ' if ok else 'FAIL'} {c['name']}: " + "; ".join(messages))
        if not ok:
            failures.append(c["name"])
            print(f"     case: {json.dumps(c)}\n     rerun: {args.harness} {directory}"
                  + ("" if args.keep else " (pass --keep DIR to keep the inputs)"))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(cases) - len(failures)} of {len(cases)} cases agree with torch")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
