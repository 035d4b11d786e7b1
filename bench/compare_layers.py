#!/usr/bin/env python3
"""dnnx vs PyTorch on the issue-4 layers, in the same run (Note [layer timing method] in
bench/layers_bench.cpp): max-pool 3x3/2 on 112x112x64, batch-norm training on 56x56x256 and
7x7x2048, relu on 56x56x256, softmax and cross-entropy over 1000 classes, forward and backward.

  GPU:  python3 bench/compare_layers.py --bench build/bench/layers_bench --device cuda \
            [--batch 64] [--configs f32_nchw,f16_nhwc] [--json out.json]
  CPU:  /usr/bin/python3 bench/compare_layers.py --bench build/bench/layers_bench --device cpu \
            --batch 8 --configs f32_nchw,bf16_nchw --threads 2

PyTorch is timed the way layers_bench times dnnx: its timer (CUDA events, or the host clock on
cpu) around a loop of back-to-back calls, median of five loops ("kernel"), and the median host
time of single synchronized calls ("per call"). PyTorch has no separate backward call for these
layers, so its backward is timed as autograd forward+backward minus its forward; dnnx's forward
and backward are timed separately. TF32 is off.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

CASES = ("maxpool", "bnorm56", "bnorm7", "relu", "softmax", "xent")


def run_dnnx(args):
    cmd = [args.bench, "--backend", "cudnn" if args.device == "cuda" else "cpu",
           "--batch", str(args.batch), "--configs", ",".join(args.configs),
           "--cases", ",".join(args.cases), "--loop", str(args.loop), "--calls", str(args.calls)]
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def torch_cases(torch, args, config):
    import torch.nn.functional as F

    dev = torch.device(args.device)
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[
        config.split("_")[0]]
    fmt = torch.channels_last if config.endswith("nhwc") else torch.contiguous_format
    n = args.batch

    def rand(*shape, low=-1.0, high=1.0, grad=False, layout=True):
        t = torch.empty(*shape, device=dev, dtype=dtype).uniform_(low, high)
        if layout and t.dim() == 4:
            t = t.contiguous(memory_format=fmt)
        return t.requires_grad_(grad)

    cases = {}
    x = rand(n, 64, 112, 112, grad=True)
    g = rand(n, 64, 56, 56)
    cases["maxpool"] = (lambda x=x: F.max_pool2d(x, 3, 2, 1), x, g, ())
    for name, shape in (("bnorm56", (n, 256, 56, 56)), ("bnorm7", (n, 2048, 7, 7))):
        x = rand(*shape, grad=True)
        c = shape[1]
        w = torch.empty(c, device=dev).uniform_(0.5, 1.5).requires_grad_(True)
        b = torch.empty(c, device=dev).uniform_(-0.5, 0.5).requires_grad_(True)
        rm = torch.zeros(c, device=dev)
        rv = torch.ones(c, device=dev)
        cases[name] = (lambda x=x, w=w, b=b, rm=rm, rv=rv:
                       F.batch_norm(x, rm, rv, w, b, training=True), x, rand(*shape), (w, b))
    x = rand(n, 256, 56, 56, grad=True)
    cases["relu"] = (lambda x=x: F.relu(x), x, rand(n, 256, 56, 56), ())
    x = rand(n, 1000, low=-4, high=4, grad=True)
    cases["softmax"] = (lambda x=x: F.softmax(x, dim=1), x, rand(n, 1000), ())
    x = rand(n, 1000, low=-4, high=4, grad=True)
    labels = torch.randint(0, 1000, (n,), device=dev)
    cases["xent"] = (lambda x=x: F.cross_entropy(x, labels), x,
                     torch.ones((), device=dev, dtype=dtype), ())
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
    loops = []
    for _ in range(5):
        if cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.loop):
                fn()
            stop.record()
            stop.synchronize()
            loops.append(start.elapsed_time(stop) / args.loop)
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
            fn, x, g, params = cases[name]
            inputs = (x,) + tuple(params)

            def fwd():
                # Inputs require grad, so the forward records what backward needs (training).
                return fn()

            def fwd_bwd():
                y = fn()
                return torch.autograd.grad(y, inputs, g)

            fk, fc = time_torch(torch, args, fwd)
            tk, tc = time_torch(torch, args, fwd_bwd)
            results[(config, name, "fwd")] = (fk, fc)
            results[(config, name, "bwd")] = (max(tk - fk, 0.0), max(tc - fc, 0.0))
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
