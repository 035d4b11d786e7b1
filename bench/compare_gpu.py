#!/usr/bin/env python3
"""dnnx's cudnn backend vs PyTorch (cudnn.benchmark=True) on the benchmark ResNet-50 shapes.

Runs build/bench/cudnn_conv_bench (exhaustive selection per layer and direction), then PyTorch on
the same cases in the same run, timed the same way (Note [gpu timing method] in
cudnn_conv_bench.cpp), and prints a Markdown table per config with the totals, the tuning cost next
to PyTorch's first-call cost, and the host overhead per call. TF32 is off on both sides.

  python3 bench/compare_gpu.py --bench build/bench/cudnn_conv_bench [--batch 64]
      [--configs f16_nhwc,f32_nchw] [--json results.json] [--dnnx-results bench_output.jsonl]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DIRECTIONS = ("fwd", "bwd_data", "bwd_weights")


def read_shapes(path, tag):
    shapes = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            name, src, weights, stride, pad, _count, *tags = line
            c, h, w = (int(v) for v in src.split("x"))
            o, cg, kh, kw = (int(v) for v in weights.split("x"))
            if tag and tag not in tags:
                continue
            shapes.append(dict(name=name, c=c, h=h, w=w, o=o, cg=cg, kh=kh, kw=kw,
                               stride=int(stride), pad=int(pad)))
    return shapes


def run_dnnx(args, results_file=None):
    if results_file:
        with open(results_file) as f:
            return [json.loads(line) for line in f if line.startswith("{")]
    cmd = [args.bench, "--shapes", args.shapes, "--batch", str(args.batch),
           "--configs", ",".join(args.configs), "--loop", str(args.loop),
           "--calls", str(args.calls)]
    print("$", " ".join(cmd), flush=True)
    start = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    sys.stderr.write(out.stderr)
    print(f"dnnx bench: {len(records)} records in {time.time() - start:.1f} s", flush=True)
    return records


def run_torch(args, shapes):
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    results = {}
    info = dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                gpu=torch.cuda.get_device_name(0))
    for config in args.configs:
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[
            config.split("_")[0]]
        fmt = torch.channels_last if config.endswith("nhwc") else torch.contiguous_format
        for s in shapes:
            groups = s["c"] // s["cg"]
            x = torch.empty(args.batch, s["c"], s["h"], s["w"], device=dev, dtype=dtype)
            x.uniform_(-1, 1)
            x = x.contiguous(memory_format=fmt)
            w = torch.empty(s["o"], s["cg"], s["kh"], s["kw"], device=dev, dtype=dtype)
            w.uniform_(-1, 1)
            w = w.contiguous(memory_format=fmt)
            stride, pad = [s["stride"]] * 2, [s["pad"]] * 2
            # dy's shape from arithmetic: running conv2d here would let the forward's search
            # happen before its first call is timed.
            oh = (s["h"] + 2 * s["pad"] - s["kh"]) // s["stride"] + 1
            ow = (s["w"] + 2 * s["pad"] - s["kw"]) // s["stride"] + 1
            dy = torch.empty(args.batch, s["o"], oh, ow, device=dev, dtype=dtype)
            dy.uniform_(-1, 1)
            dy = dy.contiguous(memory_format=fmt)

            def make(direction):
                if direction == "fwd":
                    return lambda: F.conv2d(x, w, None, stride, pad, 1, groups)
                mask = [direction == "bwd_data", direction == "bwd_weights", False]
                return lambda: torch.ops.aten.convolution_backward(
                    dy, x, w, None, stride, pad, [1, 1], False, [0, 0], groups, mask)

            for direction in DIRECTIONS:
                fn = make(direction)
                # The first call of a new shape runs cudnn.benchmark's search.
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                first_ms = (time.perf_counter() - t0) * 1e3
                for _ in range(3):
                    fn()
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                samples = []
                for _ in range(3):
                    start.record()
                    for _ in range(args.loop):
                        fn()
                    stop.record()
                    stop.synchronize()
                    samples.append(start.elapsed_time(stop) / args.loop)
                calls = []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    fn()
                    torch.cuda.synchronize()
                    calls.append((time.perf_counter() - t0) * 1e3)
                results[f"{s['name']}/{direction}/{config}"] = dict(
                    kernel_ms=statistics.median(samples), call_ms=statistics.median(calls),
                    first_call_ms=first_ms)
            del x, w, dy
    # Host overhead of a tiny conv, as the C++ bench measures it.
    x = torch.randn(1, 8, 8, 8, device=dev)
    w = torch.randn(8, 8, 3, 3, device=dev)
    for _ in range(200):
        F.conv2d(x, w, None, 1, 1)
    torch.cuda.synchronize()
    per_call = []
    for _ in range(30):
        t0 = time.perf_counter()
        for _ in range(100):
            F.conv2d(x, w, None, 1, 1)
        per_call.append((time.perf_counter() - t0) * 1e6 / 100)
        torch.cuda.synchronize()
    info["host_us_per_call_fwd"] = statistics.median(per_call)
    return results, info


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default=os.path.join(HERE, "..", "build", "bench",
                                                        "cudnn_conv_bench"))
    parser.add_argument("--shapes", default=os.path.join(HERE, "shapes", "resnet50.txt"))
    parser.add_argument("--tag", default="bench")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--configs", default="f16_nhwc,f32_nchw")
    parser.add_argument("--loop", type=int, default=50)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--dnnx-results",
                        help="read cudnn_conv_bench's output from this file instead of running "
                             "it; several files, comma-separated, give one set of tables each "
                             "against the same PyTorch run")
    args = parser.parse_args()
    args.configs = args.configs.split(",")
    shapes = read_shapes(args.shapes, args.tag)

    torch_results, torch_info = None, None
    runs = args.dnnx_results.split(",") if args.dnnx_results else [None]
    all_records = []
    for results_file in runs:
        records = run_dnnx(args, results_file)
        all_records.append(records)
        if torch_results is None:
            torch_results, torch_info = run_torch(args, shapes)
        if results_file:
            print(f"\n## dnnx results: {results_file}")
        device = next((r for r in records if r["kind"] == "device"), {})
        overhead = [r for r in records if r["kind"] == "overhead"]
        cases = {r["case"]: r for r in records if r["kind"] == "case"}

        print(f"\nGPU: {torch_info['gpu']}; dnnx: {device.get('fingerprint', '?')}; "
              f"PyTorch {torch_info['torch']} (cuDNN {torch_info['cudnn']}), "
              f"cudnn.benchmark=True, TF32 off; batch {args.batch}\n")
        for config in args.configs:
            print(f"### {config} (kernel-bound ms per call; per-call ms = synchronous wall time)\n")
            print("| layer | dir | dnnx kernel | torch kernel | dnnx/torch | dnnx call "
                  "| torch call | dnnx search s | torch 1st call s | dnnx choice | speedup vs heuristic |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            tot_d = tot_t = tot_dc = tot_tc = tot_tune = tot_first = 0.0
            worst = 0.0
            for s in shapes:
                for direction in DIRECTIONS:
                    key = f"{s['name']}/{direction}/{config}"
                    d, t = cases.get(key), torch_results.get(key)
                    if d is None or t is None:
                        print(f"| {s['name']} | {direction} | missing | | | | | | | | |")
                        continue
                    ratio = d["kernel_ms"] / t["kernel_ms"]
                    worst = max(worst, ratio)
                    tot_d += d["kernel_ms"]
                    tot_t += t["kernel_ms"]
                    tot_dc += d["call_ms"]
                    tot_tc += t["call_ms"]
                    tot_tune += d["first_call_ms"] / 1e3
                    tot_first += t["first_call_ms"] / 1e3
                    first_s = d["first_call_ms"] / 1e3  # includes listing (list_ms)
                    print(f"| {s['name']} | {direction} | {d['kernel_ms']:.3f} "
                          f"| {t['kernel_ms']:.3f} | {ratio:.2f} | {d['call_ms']:.3f} "
                          f"| {t['call_ms']:.3f} "
                          f"| {first_s:.2f} | {t['first_call_ms'] / 1e3:.2f} "
                          f"| `{d['algo']}` | {d['heuristic_kernel_ms'] / d['kernel_ms']:.2f} |")
            if tot_t > 0:
                print(f"| **total** | | **{tot_d:.3f}** | **{tot_t:.3f}** "
                      f"| **{tot_d / tot_t:.2f}** | {tot_dc:.3f} | {tot_tc:.3f} "
                      f"| {tot_tune:.1f} | {tot_first:.1f} | "
                      f"worst layer {worst:.2f} | |\n")
    print("Host overhead per conv call (tiny 1x8x8x8 conv, batches of 100 calls, no sync):")
    for r in overhead:
        print(f"  dnnx {r['direction']}: {r['host_us_per_call']:.2f} us host through the op layer "
              f"({r['algo']}; its plan's execute() alone {r['plan_execute_us']:.2f} us; "
              f"{r['legacy_algo']} {r['legacy_host_us_per_call']:.2f} us; "
              f"GPU {r['gpu_us_per_call']:.2f} us/call)")
    print(f"  torch fwd: {torch_info['host_us_per_call_fwd']:.2f} us host")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(dnnx=records if len(all_records) == 1 else all_records,
                           torch=torch_results, torch_info=torch_info), f, indent=1)


if __name__ == "__main__":
    main()
