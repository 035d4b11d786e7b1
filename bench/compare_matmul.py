#!/usr/bin/env python3
"""dnnx vs PyTorch on the matrix multiplies of real networks, every direction, in the same run:
ResNet-50's classifier (2048 -> 1000 + bias), a square 4096^3 product, a 4096 -> 1024
projection of 8192 tokens, the attention products of a 12-head, 64-dim model at sequence
length 512, and a transformer MLP's up-projection 1024 -> 4096 with a bias and a relu or gelu
(tanh) epilogue (bench/matmul_bench.cpp lists them).

  GPU:  python3 bench/compare_matmul.py --bench build/bench/matmul_bench --device cuda \
            [--configs f16,bf16,f32] [--json out.json]
  CPU:  /usr/bin/python3 bench/compare_matmul.py --bench build/bench/matmul_bench --device cpu \
            --rows 8 --configs f32 --threads 2

PyTorch is timed as matmul_bench times dnnx (Note [layer timing method] in
bench/layers_bench.cpp, through compare_layers.time_torch): the functions autograd runs for a
linear layer and for torch.matmul, called directly: forward aten.addmm (with bias) / mm / bmm,
backward data mm / bmm of diff_dst with the weight, backward weights mm / bmm of diff_dst^T with
the input, plus sum over the rows for the bias gradient. With an activation, PyTorch composes
what autograd runs for F.linear then F.relu / F.gelu(approximate='tanh'): forward (and the
training forward) addmm then the activation, each backward the activation's backward (on the
saved output / input) then the product; dnnx runs its fused or unfused candidates. TF32 is off on
both sides. The table
gives both times, their ratio and the achieved TFLOP/s (2 m n k per product); the total is the
sum of dnnx's kernel times over PyTorch's.

With --rounds N the benchmark (its own searches included) and PyTorch's timing take turns N times,
and each row gives the medians over the rounds of either side (and every choice dnnx made): the
large products run near the GPU's peak, where the clock a loop happens to get moves a row by a
few percent, in either direction, between back-to-back runs of one kernel.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_layers import time_torch  # noqa: E402


def run_dnnx(args):
    cmd = [args.bench, "--backend", "cudnn" if args.device == "cuda" else "cpu",
           "--configs", ",".join(args.configs), "--loop", str(args.loop),
           "--calls", str(args.calls)]
    if args.rows:
        cmd += ["--rows", str(args.rows)]
    if args.cases:
        cmd += ["--cases", args.cases]
    print("$", " ".join(cmd), flush=True)
    env = dict(os.environ)
    if args.bench_library_path:
        env["LD_LIBRARY_PATH"] = args.bench_library_path
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    sys.stderr.write(out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def torch_call(torch, args, r):
    """PyTorch's call for matmul_bench's record `r`: the same product, direction and dtype."""
    aten = torch.ops.aten
    dev = torch.device(args.device)
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[r["config"]]
    batch, m, n, k = r["batch"], r["m"], r["n"], r["k"]

    def rand(*shape):
        return torch.empty(*shape, device=dev, dtype=dtype).uniform_(-1, 1)

    lead = (batch,) if batch > 1 else ()
    a = rand(*lead, m, k)
    b = rand(*lead, n, k) if r["transpose_b"] else rand(*lead, k, n)
    op_b = b.transpose(-1, -2) if r["transpose_b"] else b
    g = rand(*lead, m, n)
    bias = rand(n) if r["bias"] else None
    mul = aten.bmm if batch > 1 else aten.mm
    direction = r["direction"]
    activation = r.get("activation", "none")
    if activation != "none":
        pre = aten.addmm(bias, a, op_b)
        if activation == "relu":
            act = lambda x: aten.relu(x)  # noqa: E731
            out = act(pre)
            dact = lambda: aten.threshold_backward(g, out, 0)  # noqa: E731
        else:
            act = lambda x: aten.gelu(x, approximate="tanh")  # noqa: E731
            dact = lambda: aten.gelu_backward(g, pre, approximate="tanh")  # noqa: E731
        if direction in ("fwd", "fwd_training"):
            return lambda: act(aten.addmm(bias, a, op_b))
        if direction == "bwd_data":
            return lambda: mul(dact(), op_b.transpose(-1, -2))
        return lambda: (lambda gp: (mul(gp.transpose(-1, -2), a), aten.sum(gp, [0])))(dact())
    if direction == "fwd":
        if bias is not None:
            return lambda: aten.addmm(bias, a, op_b)
        return lambda: mul(a, op_b)
    if direction == "bwd_data":
        return lambda: mul(g, op_b.transpose(-1, -2))
    # bwd_weights: the gradient as b is stored (b^T's for a transposed b), and the bias's.
    if r["transpose_b"]:
        weights = lambda: mul(g.transpose(-1, -2), a)  # noqa: E731
    else:
        weights = lambda: mul(a.transpose(-1, -2), g)  # noqa: E731
    if bias is not None:
        return lambda: (weights(), aten.sum(g, [0]))
    return weights


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="path of the matmul_bench binary")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--configs", default=None, help="default f16,bf16,f32 (cuda) / f32 (cpu)")
    parser.add_argument("--cases", default="", help="comma-separated; default all")
    parser.add_argument("--rows", type=int, default=0,
                        help="rows of the large products (cpu: 8); attention: rows/8 sequences")
    parser.add_argument("--loop", type=int, default=None, help="calls per timed loop")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs of the benchmark and of PyTorch, taking turns; each row gives "
                             "the medians over them")
    parser.add_argument("--threads", type=int, default=2, help="cpu: PyTorch threads")
    parser.add_argument("--bench-library-path", default="",
                        help="LD_LIBRARY_PATH of the benchmark alone (cuDNN, CUDA libraries), so "
                             "that PyTorch in this process loads its own cuBLAS")
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args()
    args.configs = (args.configs or ("f16,bf16,f32" if args.device == "cuda" else "f32")).split(",")
    if args.loop is None:
        args.loop = 20 if args.device == "cuda" else 5

    import torch

    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        info = dict(torch=torch.__version__, gpu=torch.cuda.get_device_name(0),
                    cublas=getattr(torch.backends.cuda, "cublas_version", lambda: None)())
    else:
        torch.set_num_threads(args.threads)
        info = dict(torch=torch.__version__, threads=torch.get_num_threads())
    # Per row (config, shape, direction): the benchmark's record of every round and PyTorch's
    # (kernel ms, per-call ms) of the same round.
    runs, order, device = {}, [], {}
    for _ in range(args.rounds):
        records = run_dnnx(args)
        device = next((r for r in records if r["kind"] == "device"), device)
        for r in records:
            if r["kind"] != "case":
                continue
            key = (r["config"], r["shape"], r["direction"])
            if key not in runs:
                runs[key] = []
                order.append(key)
            runs[key].append((r, time_torch(torch, args, torch_call(torch, args, r))))
    print(f"\ndnnx: {device.get('describe', '?')}\nPyTorch: {info}\nrounds: {args.rounds}\n")
    rows = []
    for config in args.configs:
        print(f"### {config}\n")
        print("| case | dir | dnnx algorithm | dnnx ms | PyTorch ms | ratio | dnnx TFLOP/s "
              "| PyTorch TFLOP/s | dnnx per call ms | PyTorch per call ms |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for key in order:
            if key[0] != config:
                continue
            rounds = runs[key]
            r = rounds[0][0]
            dk = statistics.median(one["kernel_ms"] for one, _ in rounds)
            dc = statistics.median(one["per_call_ms"] for one, _ in rounds)
            tk = statistics.median(theirs[0] for _, theirs in rounds)
            tc = statistics.median(theirs[1] for _, theirs in rounds)
            algos = list(dict.fromkeys(one["algo"] for one, _ in rounds))
            flops = 2.0 * r["batch"] * r["m"] * r["n"] * r["k"]
            ratio = dk / tk if tk > 0 else float("inf")
            rows.append(dict(r, kernel_ms=dk, per_call_ms=dc, tflops=flops / (dk * 1e9),
                             algos=algos, torch_kernel_ms=tk, torch_per_call_ms=tc,
                             kernel_ratio=ratio, torch_tflops=flops / (tk * 1e9),
                             rounds=[dict(kernel_ms=one["kernel_ms"], algo=one["algo"],
                                          torch_kernel_ms=theirs[0]) for one, theirs in rounds]))
            print(f"| {r['shape']} | {r['direction']} | "
                  f"{' / '.join(f'`{a}`' for a in algos)} | {dk:.4f} | {tk:.4f} | {ratio:.2f} | "
                  f"{flops / (dk * 1e9):.3g} | {flops / (tk * 1e9):.3g} | {dc:.4f} | {tc:.4f} |")
        config_rows = [row for row in rows if row["config"] == config]
        if config_rows:
            total = (sum(row["kernel_ms"] for row in config_rows)
                     / sum(row["torch_kernel_ms"] for row in config_rows))
            print(f"\n{config} total dnnx/PyTorch: {total:.2f}; worst shape: "
                  f"{max(row['kernel_ratio'] for row in config_rows):.2f}\n")
    if rows:
        total = sum(row["kernel_ms"] for row in rows) / sum(row["torch_kernel_ms"] for row in rows)
        print(f"all configs total dnnx/PyTorch: {total:.2f} (target <= 0.95); worst shape: "
              f"{max(row['kernel_ratio'] for row in rows):.3f} (target <= 1.0)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=device, torch=info, rounds=args.rounds, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
