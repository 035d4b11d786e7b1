#!/usr/bin/env python3
"""The reference softmax against PyTorch (the oracle of the oracle).

    torch_softmax_parity.py SOFTMAX_HARNESS [--keep DIR] [--case SUBSTRING]

For every case of the table below: numpy draws float32 inputs, softmax_harness runs softmax /
log-softmax forward and backward on dnnx's reference backend, and torch computes the same in
float64: torch.softmax / torch.log_softmax over dim 1 (channel mode) or over the flattened
C*D*H*W of each sample (instance mode), and autograd for the gradient of sum(dst * diff_dst).
The reference rounds its f32 output once; its backward starts from that rounded dst. Every element
must agree within 8 f32 ulps of its scale: |y| (+1 for log-softmax) forward, the backward formula
on absolute values backward.

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
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"SKIP: the PyTorch oracle needs torch and numpy ({error}); on Debian: "
          "apt-get install python3-torch python3-numpy", file=sys.stderr)
    sys.exit(SKIP)

TOLERANCE = 8 * 2.0 ** -24


def case(name, dims, mode="channel", log=False, layout="nchw", magnitude=4.0, centers=(0.0,)):
    """Inputs: per element one of `centers` plus uniform noise in [-magnitude, magnitude)."""
    return {"name": name, "dims": list(dims), "mode": mode, "log": log, "layout": layout,
            "magnitude": magnitude, "centers": list(centers)}


CASES = []
for _log in (False, True):
    _tag = "log" if _log else "exp"
    CASES += [
        case(f"2d_{_tag}", (5, 11), log=_log),
        case(f"2d_batch1_{_tag}", (1, 1000), log=_log),
        case(f"2d_one_class_{_tag}", (3, 1), log=_log),
        case(f"1d_channel_{_tag}", (2, 5, 9), log=_log),
        case(f"1d_instance_nhwc_{_tag}", (2, 5, 9), "instance", _log, "nhwc"),
        case(f"2d_spatial_channel_{_tag}", (2, 3, 7, 5), log=_log),
        case(f"2d_spatial_channel_nhwc_{_tag}", (2, 3, 7, 5), log=_log, layout="nhwc"),
        case(f"2d_spatial_instance_{_tag}", (2, 3, 7, 5), "instance", _log),
        case(f"3d_channel_nhwc_{_tag}", (2, 4, 3, 5, 6), log=_log, layout="nhwc"),
        case(f"3d_instance_{_tag}", (1, 4, 3, 5, 6), "instance", _log),
        case(f"large_{_tag}", (4, 17), log=_log, magnitude=1e4),
        case(f"large_spatial_{_tag}", (2, 6, 3, 3), log=_log, magnitude=1e4),
        # Logits clustered near large values (Note [large-logit rows] in
        # tests/ops/softmax_cases.cpp): log(sum) of order 1 next to a maximum of 1e4 or 1e5.
        case(f"near1e4_{_tag}", (4, 37), log=_log, centers=(1e4,)),
        case(f"near1e5_spatial_{_tag}", (2, 21, 3, 5), log=_log, centers=(1e5,)),
        case(f"nearneg1e5_instance_nhwc_{_tag}", (2, 3, 5, 7), "instance", _log, "nhwc",
             centers=(-1e5,)),
        case(f"mixed1e5_{_tag}", (4, 37), log=_log, centers=(1e5, -1e5, 30.0, -3e4)),
    ]


def torch_softmax(c, src, diff_dst, dst_for_backward):
    """dst (float64) of src, and the gradient of sum(dst * diff_dst) w.r.t. src evaluated as the
    reference evaluates it: from the dst it was given (the formula of cuDNN's backward)."""
    x = torch.tensor(src, dtype=torch.float64, requires_grad=True)
    shape = x.shape
    flat = x.reshape(shape[0], -1) if c["mode"] == "instance" else x
    fn = torch.log_softmax if c["log"] else torch.softmax
    y = fn(flat, dim=1).reshape(shape)
    y.backward(torch.tensor(diff_dst, dtype=torch.float64))
    # The reference's backward uses its own f32 dst: torch's formula applied to that dst.
    d = torch.tensor(dst_for_backward, dtype=torch.float64)
    g = torch.tensor(diff_dst, dtype=torch.float64)
    if c["mode"] == "instance":
        d, g = d.reshape(shape[0], -1), g.reshape(shape[0], -1)
    if c["log"]:
        grad = g - torch.exp(d) * g.sum(dim=1, keepdim=True)
        scale = g.abs() + torch.exp(d) * g.abs().sum(dim=1, keepdim=True)
    else:
        grad = d * (g - (g * d).sum(dim=1, keepdim=True))
        scale = d.abs() * (g.abs() + (g * d).abs().sum(dim=1, keepdim=True))
    return (y.detach().numpy(), x.grad.numpy(), grad.reshape(shape).numpy(),
            scale.reshape(shape).numpy())


def compare(name, got, want, scale):
    if got.shape != want.shape:
        return False, f"{name}: shape {got.shape} from dnnx, {want.shape} from torch"
    error = np.abs(got.astype(np.float64) - want)
    bound = TOLERANCE * scale + 1e-30
    ratio = error / bound
    worst = float(ratio.max()) if ratio.size else 0.0
    bad = int((ratio > 1).sum())
    if bad == 0:
        return True, f"{name}: worst {worst:.3f} of the bound"
    at = np.unravel_index(int(ratio.argmax()), ratio.shape)
    return False, (f"{name}: {bad} of {ratio.size} elements outside {TOLERANCE:.3g} * scale "
                   f"(worst {worst:.3g}x at {list(at)}: dnnx {got[at]!r}, torch {want[at]!r})")


def run_case(harness, c, directory, rng):
    centers = np.array(c["centers"], dtype=np.float64)
    src = (rng.choice(centers, c["dims"])
           + rng.uniform(-c["magnitude"], c["magnitude"], c["dims"])).astype(np.float32)
    diff_dst = rng.uniform(-1, 1, c["dims"]).astype(np.float32)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "case.json"), "w") as out:
        json.dump({k: c[k] for k in ("dims", "mode", "log", "layout")}, out)
    np.save(os.path.join(directory, "src.npy"), src)
    np.save(os.path.join(directory, "diff_dst.npy"), diff_dst)
    result = subprocess.run([harness, directory], capture_output=True, text=True)
    if result.returncode != 0:
        return False, [f"softmax_harness exited {result.returncode}: {result.stderr.strip()}"]
    dst = np.load(os.path.join(directory, "dst.npy"))
    diff_src = np.load(os.path.join(directory, "diff_src.npy"))
    want_dst, autograd, want_grad, grad_scale = torch_softmax(
        c, src.astype(np.float64), diff_dst.astype(np.float64), dst.astype(np.float64))
    dst_scale = np.abs(want_dst) + (1.0 if c["log"] else 0.0)
    ok_dst, message_dst = compare("dst", dst, want_dst, dst_scale)
    ok_grad, message_grad = compare("diff_src", diff_src, want_grad, grad_scale)
    # The formula itself is autograd's gradient (on torch's own dst, to f64 precision).
    formula_ok = bool(np.allclose(
        torch_softmax(c, src.astype(np.float64), diff_dst.astype(np.float64), want_dst)[2],
        autograd, rtol=1e-9, atol=1e-12))
    messages = [message_dst, message_grad]
    if not formula_ok:
        messages.append("the backward formula differs from torch autograd")
    return ok_dst and ok_grad and formula_ok, messages


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("harness", help="path of the softmax_harness executable")
    parser.add_argument("--keep", help="write the case directories here and keep them")
    parser.add_argument("--case", default="", help="run only cases whose name contains this")
    args = parser.parse_args()
    if not os.access(args.harness, os.X_OK):
        parser.error(f"harness {args.harness!r} is not an executable file")

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    root = args.keep or tempfile.mkdtemp(prefix="dnnx_torch_softmax_")
    failures = []
    cases = [c for c in CASES if args.case in c["name"]]
    for index, c in enumerate(cases):
        rng = np.random.default_rng(2000 + index)
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
