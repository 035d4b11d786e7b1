#!/usr/bin/env python3
"""dnnx vs PyTorch on ResNet-50's pooling, batch-norm, relu, softmax and cross-entropy layers, in
the same run (Note [layer timing method] in bench/layers_bench.cpp): max-pool 3x3/2 on 112x112x64 (dnnx with argmax indices, as PyTorch,
and without: case maxpool_srcdst), batch-norm training on 56x56x256 and
7x7x2048, relu on 56x56x256, softmax and cross-entropy over 1000 classes, forward and backward.

  GPU:  python3 bench/compare_layers.py --bench build/bench/layers_bench --device cuda \
            [--batch 64] [--configs f32_nchw,f16_nhwc] [--json out.json]
  CPU:  /usr/bin/python3 bench/compare_layers.py --bench build/bench/layers_bench --device cpu \
            --batch 8 --configs f32_nchw,bf16_nchw --threads 2

PyTorch is timed the way layers_bench times dnnx: its timer (CUDA events, or the host clock on
cpu) around a loop of back-to-back calls, median of five loops ("kernel"), and the median host
time of single synchronized calls ("per call"). Both sides' forward and backward are timed
separately; on PyTorch's side they are the aten functions F.max_pool2d, F.batch_norm (training),
F.relu, F.softmax and F.cross_entropy run and their autograd backward calls, called directly (so
no autograd bookkeeping is counted): max_pool2d_with_indices(_backward),
_batch_norm_impl_index(_backward) (cuDNN or native, as PyTorch decides), relu /
threshold_backward, _softmax / _softmax_backward_data, _log_softmax + nll_loss_forward /
nll_loss_backward + _log_softmax_backward_data. TF32 is off.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_gpu import gated_loop_ms, sleep_cycles_per_ms  # noqa: E402

CASES = ("maxpool", "maxpool_srcdst", "bnorm56", "bnorm7", "relu", "softmax", "xent")


def run_dnnx(args):
    cmd = [args.bench, "--backend", "cudnn" if args.device == "cuda" else "cpu",
           "--batch", str(args.batch), "--configs", ",".join(args.configs),
           "--cases", ",".join(args.cases), "--loop", str(args.loop), "--calls", str(args.calls)]
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def torch_cases(torch, args, config):
    """{case: (forward, backward)}: PyTorch's own forward and backward ops, called directly (the
    aten functions autograd calls), so neither side pays autograd's bookkeeping."""
    aten = torch.ops.aten
    dev = torch.device(args.device)
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[
        config.split("_")[0]]
    fmt = torch.channels_last if config.endswith("nhwc") else torch.contiguous_format
    n = args.batch

    def rand(*shape, low=-1.0, high=1.0):
        t = torch.empty(*shape, device=dev, dtype=dtype).uniform_(low, high)
        return t.contiguous(memory_format=fmt) if t.dim() == 4 else t

    cases = {}
    x = rand(n, 64, 112, 112)
    _, indices = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], False)
    g = rand(n, 64, 56, 56)
    # PyTorch's max pooling always has its indices (the backward reads nothing else): dnnx's
    # "maxpool" does the same, "maxpool_srcdst" is dnnx's backward from src and dst instead.
    cases["maxpool"] = (
        lambda x=x: aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], False),
        lambda x=x, g=g, i=indices: aten.max_pool2d_with_indices_backward(
            g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, i))
    cases["maxpool_srcdst"] = cases["maxpool"]
    for name, shape in (("bnorm56", (n, 256, 56, 56)), ("bnorm7", (n, 2048, 7, 7))):
        x = rand(*shape)
        g = rand(*shape)
        c = shape[1]
        w = torch.empty(c, device=dev).uniform_(0.5, 1.5)
        b = torch.empty(c, device=dev).uniform_(-0.5, 0.5)
        rm = torch.zeros(c, device=dev)
        rv = torch.ones(c, device=dev)
        # What F.batch_norm(training=True) and its autograd backward call (cuDNN or native).
        _, mean, var, reserve, impl = aten._batch_norm_impl_index(
            x, w, b, rm, rv, True, 0.1, 1e-5, True)
        cases[name] = (
            lambda x=x, w=w, b=b, rm=rm, rv=rv: aten._batch_norm_impl_index(
                x, w, b, rm, rv, True, 0.1, 1e-5, True),
            lambda x=x, g=g, w=w, rm=rm, rv=rv, mean=mean, var=var, reserve=reserve, impl=impl:
                aten._batch_norm_impl_index_backward(impl, x, g, w, rm, rv, mean, var, True, 1e-5,
                                                     [True, True, True], reserve))
    x = rand(n, 256, 56, 56)
    y = torch.relu(x)
    g = rand(n, 256, 56, 56)
    cases["relu"] = (lambda x=x: torch.relu(x),
                     lambda g=g, y=y: aten.threshold_backward(g, y, 0))
    x = rand(n, 1000, low=-4, high=4)
    y = aten._softmax(x, 1, False)
    g = rand(n, 1000)
    cases["softmax"] = (lambda x=x: aten._softmax(x, 1, False),
                        lambda g=g, y=y, dt=x.dtype: aten._softmax_backward_data(g, y, 1, dt))
    x = rand(n, 1000, low=-4, high=4)
    labels = torch.randint(0, 1000, (n,), device=dev)
    logp = aten._log_softmax(x, 1, False)
    _, total = aten.nll_loss_forward(logp, labels, None, 1, -100)
    g = torch.ones((), device=dev, dtype=dtype)

    def xent_fwd(x=x):
        lp = aten._log_softmax(x, 1, False)
        return aten.nll_loss_forward(lp, labels, None, 1, -100)

    def xent_bwd(g=g, lp=logp, total=total, dt=x.dtype):
        grad_lp = aten.nll_loss_backward(g, lp, labels, None, 1, -100, total)
        return aten._log_softmax_backward_data(grad_lp, lp, 1, dt)

    cases["xent"] = (xent_fwd, xent_bwd)
    return cases


def time_torch(torch, args, fn):
    """(kernel ms, per-call ms) of fn, Note [layer timing method]."""
    cuda = args.device == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for _ in range(3):
        fn()
    sync()
    if cuda:
        # Note [gated PyTorch loops] in compare_gpu.py: the stream held while the loop is queued,
        # as dnnx's backend timer holds its own; the host's time to queue a loop sizes the hold.
        if not hasattr(time_torch, "cycles_per_ms"):
            time_torch.cycles_per_ms = sleep_cycles_per_ms(torch.cuda)
        t0 = time.perf_counter()
        for _ in range(args.loop):
            fn()
        host_ms = (time.perf_counter() - t0) * 1e3
        sync()
    loops = []
    for _ in range(5):
        if cuda:
            ms, gated = gated_loop_ms(torch.cuda, fn, args.loop, host_ms, time_torch.cycles_per_ms)
            if not gated:
                print(f"compare_layers: a PyTorch loop was timed with host time in it (the sleep "
                      f"did not outlast {host_ms:.2f} ms of queuing)", file=sys.stderr)
            loops.append(ms)
        else:
            t0 = time.perf_counter()
            for _ in range(args.loop):
                fn()
            loops.append((time.perf_counter() - t0) * 1e3 / args.loop)
    calls = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        fn()
        sync()
        calls.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(loops), statistics.median(calls)


def run_torch(args):
    import torch

    if args.device == "cuda":
        torch.backends.cudnn.enabled = True
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        info = dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                    gpu=torch.cuda.get_device_name(0))
    else:
        torch.set_num_threads(args.threads)
        info = dict(torch=torch.__version__, threads=torch.get_num_threads())
    results = {}
    for config in args.configs:
        cases = torch_cases(torch, args, config)
        for name in args.cases:
            fwd, bwd = cases[name]
            results[(config, name, "fwd")] = time_torch(torch, args, fwd)
            results[(config, name, "bwd")] = time_torch(torch, args, bwd)
    return info, results


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="path of the layers_bench binary")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--configs", default=None,
                        help="comma-separated, default f32_nchw,f16_nhwc (cuda) / "
                             "f32_nchw,bf16_nchw (cpu)")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--loop", type=int, default=None, help="calls per timed loop")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2, help="cpu: PyTorch threads")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args()
    args.configs = (args.configs or ("f32_nchw,f16_nhwc" if args.device == "cuda"
                                     else "f32_nchw,bf16_nchw")).split(",")
    args.cases = args.cases.split(",")
    if args.loop is None:
        args.loop = 50 if args.device == "cuda" else 10

    records = run_dnnx(args)
    device = next((r for r in records if r["kind"] == "device"), {})
    info, torch_results = run_torch(args)
    print(f"\ndnnx: {device.get('describe', '?')}\nPyTorch: {info}\n")
    rows = []
    for config in args.configs:
        print(f"### {config}, batch {args.batch}\n")
        print("| case | dir | dnnx algorithm | dnnx kernel ms | PyTorch kernel ms | ratio "
              "| dnnx per call ms | PyTorch per call ms | ratio |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in records:
            if r["kind"] != "case" or r["config"] != config:
                continue
            tk, tc = torch_results[(config, r["case"], r["direction"])]
            kr = r["kernel_ms"] / tk if tk > 0 else float("inf")
            cr = r["per_call_ms"] / tc if tc > 0 else float("inf")
            rows.append(dict(r, torch_kernel_ms=tk, torch_per_call_ms=tc, kernel_ratio=kr,
                             per_call_ratio=cr))
            print(f"| {r['shape']} | {r['direction']} | `{r['algo']}` | {r['kernel_ms']:.4f} | "
                  f"{tk:.4f} | {kr:.2f} | {r['per_call_ms']:.4f} | {tc:.4f} | {cr:.2f} |")
        print()
    worst = max((row["kernel_ratio"] for row in rows), default=float("nan"))
    print(f"worst kernel ratio dnnx/PyTorch: {worst:.2f} (target <= 1.0)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=device, torch=info, batch=args.batch, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
