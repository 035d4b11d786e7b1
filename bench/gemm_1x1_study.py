#!/usr/bin/env python3
"""Would a GEMM beat cuDNN on the suite's 1x1 convolutions? PyTorch on the GPU, both ways.

A 1x1 convolution of stride 1, no padding and one group is a matrix product: in NHWC the whole
batch is one GEMM (src {N*H*W, C} times weights^T {C, K}); in NCHW it is a batched GEMM whose
weights are shared by every sample (weights {K, C} times src[n] {C, H*W}), and the weights'
gradient sums N products. cuDNN's fp32 engines ran these layers at 16-42 TFLOP/s on an H200 in
the shape suite (docs/benchmarks.md), where cuBLASLt's fp32 GEMMs run at 50-54 on large products
("GPU matmul vs PyTorch"). Before dnnx lists such GEMMs as convolution candidates, this measures
the gap with PyTorch alone: per layer and direction, torch's convolution under
cudnn.benchmark=True against torch.matmul on the same tensors (cuBLAS's heuristic pick, not a
search: a lower bound of what a search over cuBLASLt's configurations finds), timed as
compare_gpu.py times PyTorch (CUDA events around loops of `--loop` calls, median of three loops),
TF32 and reduced-precision reductions off, the GEMM's result checked against the convolution's.

  python3 bench/gemm_1x1_study.py [--files resnext50_32x4d,deeplabv3] [--configs f32_nchw,f16_nhwc]
      [--json out.json] [--dry-run]

Every bench/shapes/*.txt file by default (resnet50.txt included), each at its own batch. Weight
gradients in NCHW are timed two ways: a batched product then a sum over the batch, and
torch.einsum (which copies both operands into one product's layout); the faster one counts.
--dry-run lists the layers it would time without a GPU.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_gpu import read_shapes_file  # noqa: E402

DIRECTIONS = ("fwd", "bwd_data", "bwd_weights")


def gemm_layers(path):
    """(batch, layers) of a shapes file: its 2-D 1x1 layers of stride 1, no padding, one group."""
    shapes, batch = read_shapes_file(path, "all")
    keep = [s for s in shapes
            if len(s["spatial"]) == 2 and s["kernel"] == [1, 1] and s["stride"] == [1, 1]
            and s["pad"] == [0, 0] and s["groups"] == 1]
    return batch, keep


def time_ms(torch, fn, loop):
    for _ in range(3):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(3):
        start.record()
        for _ in range(loop):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / loop)
    return statistics.median(samples)


def relative_error(torch, got, want):
    got, want = got.float(), want.float()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def shapes_paths(files):
    """The shapes files named in `files` (comma-separated names in bench/shapes or paths); every
    file of bench/shapes when it names none."""
    folder = os.path.join(HERE, "shapes")
    names = [f for f in files.split(",") if f] or sorted(
        f[:-4] for f in os.listdir(folder) if f.endswith(".txt"))
    return [n if os.path.sep in n else os.path.join(folder, n + ".txt") for n in names]


def torch_for_timing():
    """PyTorch set as the studies time it: cudnn.benchmark on, TF32 and reduced-precision
    reductions off."""
    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    return torch


def torch_or_skip(script):
    """torch_for_timing(), or exit 77 (what ctest reads as skipped) where PyTorch is not
    importable."""
    try:
        return torch_for_timing()
    except ImportError as error:
        print(f"{script}: PyTorch is not importable ({error})", file=sys.stderr)
        sys.exit(77)


def study_plan(plan, configs, run):
    """The rows of every (file, batch, layer) of `plan` under each of `configs`, in that order:
    run(layer, batch, config) gives a layer's rows, each then named by its file."""
    rows = []
    for config in configs:
        for file, batch, s in plan:
            for row in run(s, batch, config):
                row["file"] = file
                rows.append(row)
    return rows


def finish_study(script, args, torch, rows, worst, started, limit, against):
    """A study's closing line, its --json file (PyTorch's version, --device, the GPU, the rows)
    and its exit status: 1 naming `against` (what the results were checked against) when the
    worst relative error is over `limit`."""
    print(f"{len(rows)} rows in {time.time() - started:.0f} s; worst relative error {worst:.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(torch=torch.__version__, device=args.device,
                           gpu=torch.cuda.get_device_name(0) if args.device == "cuda" else "",
                           rows=rows), f, indent=1)
    if worst > limit:
        sys.exit(f"{script}: a result differs from {against} by {worst:.1e}")


def study_layer(torch, s, batch, config, loop):
    dev = torch.device("cuda")
    dtype = torch.float32 if config.startswith("f32") else torch.float16
    nhwc = config.endswith("nhwc")
    fmt = torch.channels_last if nhwc else torch.contiguous_format
    n, c, k = batch, s["c"], s["o"]
    h, w = s["spatial"]
    x = torch.empty(n, c, h, w, device=dev, dtype=dtype).uniform_(-1, 1).contiguous(
        memory_format=fmt)
    wt = torch.empty(k, c, 1, 1, device=dev, dtype=dtype).uniform_(-1, 1).contiguous(
        memory_format=fmt)
    dy = torch.empty(n, k, h, w, device=dev, dtype=dtype).uniform_(-1, 1).contiguous(
        memory_format=fmt)
    w2 = wt.view(k, c) if not nhwc else wt.permute(0, 2, 3, 1).reshape(k, c)

    def conv(direction):
        if direction == "fwd":
            return lambda: torch.ops.aten.convolution(x, wt, None, [1, 1], [0, 0], [1, 1], False,
                                                      [0, 0], 1)
        mask = [direction == "bwd_data", direction == "bwd_weights", False]
        index = 0 if direction == "bwd_data" else 1
        return lambda: torch.ops.aten.convolution_backward(
            dy, x, wt, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, mask)[index]

    if nhwc:  # one GEMM over N*H*W rows: views of the channels-last tensors
        x2 = x.permute(0, 2, 3, 1).reshape(n * h * w, c)
        dy2 = dy.permute(0, 2, 3, 1).reshape(n * h * w, k)
        gemms = {"fwd": [("mm", lambda: x2 @ w2.t())],
                 "bwd_data": [("mm", lambda: dy2 @ w2)],
                 "bwd_weights": [("mm", lambda: dy2.t() @ x2)]}
        as_conv = {"fwd": lambda r: r.view(n, h, w, k).permute(0, 3, 1, 2),
                   "bwd_data": lambda r: r.view(n, h, w, c).permute(0, 3, 1, 2),
                   "bwd_weights": lambda r: r.view(k, c, 1, 1)}
    else:  # a batched GEMM with the weights shared
        x3, dy3 = x.view(n, c, h * w), dy.view(n, k, h * w)
        gemms = {"fwd": [("bmm", lambda: torch.matmul(w2, x3))],
                 "bwd_data": [("bmm", lambda: torch.matmul(w2.t(), dy3))],
                 "bwd_weights": [("bmm+sum", lambda: torch.matmul(dy3, x3.transpose(1, 2)).sum(0)),
                                 ("einsum", lambda: torch.einsum("nkp,ncp->kc", dy3, x3))]}
        as_conv = {"fwd": lambda r: r.view(n, k, h, w),
                   "bwd_data": lambda r: r.view(n, c, h, w),
                   "bwd_weights": lambda r: r.view(k, c, 1, 1)}
    rows = []
    flops = 2.0 * n * h * w * c * k
    for direction in DIRECTIONS:
        reference = conv(direction)()
        conv_ms = time_ms(torch, conv(direction), loop)
        best = None
        for name, fn in gemms[direction]:
            error = relative_error(torch, as_conv[direction](fn()), reference)
            ms = time_ms(torch, fn, loop)
            if best is None or ms < best[1]:
                best = (name, ms, error)
        rows.append(dict(layer=s["name"], direction=direction, config=config, batch=n,
                         shape=f"{n}x{c}x{h}x{w} -> {k}", conv_ms=conv_ms, gemm=best[0],
                         gemm_ms=best[1], ratio=best[1] / conv_ms, rel_error=best[2],
                         conv_tflops=flops / conv_ms / 1e9, gemm_tflops=flops / best[1] / 1e9))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="", help="comma-separated shapes files (names or paths)")
    parser.add_argument("--configs", default="f32_nchw,f16_nhwc")
    parser.add_argument("--loop", type=int, default=50)
    parser.add_argument("--json", default="")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    paths = shapes_paths(args.files)
    configs = [c for c in args.configs.split(",") if c]
    for config in configs:
        if config not in ("f32_nchw", "f16_nhwc"):
            parser.error(f"--configs: '{config}' is not one of f32_nchw, f16_nhwc")
    plan = []
    for path in paths:
        batch, layers = gemm_layers(path)
        plan += [(os.path.basename(path), batch or 1, s) for s in layers]
    if args.dry_run:
        for file, batch, s in plan:
            h, w = s["spatial"]
            print(f"{file} {s['name']}: {batch}x{s['c']}x{h}x{w} -> {s['o']}")
        print(f"{len(plan)} layers x {len(configs)} configs x 3 directions")
        return
    torch = torch_for_timing()
    rows = study_plan(plan, configs,
                      lambda s, batch, config: study_layer(torch, s, batch, config, args.loop))
    print("| file | layer | dir | config | shape | conv ms | gemm ms | gemm/conv | conv TFLOP/s "
          "| gemm TFLOP/s | gemm | rel. error |")
    print("|---|---|---|---|---|--:|--:|--:|--:|--:|---|--:|")
    for r in rows:
        print(f"| {r['file']} | {r['layer']} | {r['direction']} | {r['config']} | {r['shape']} | "
              f"{r['conv_ms']:.3f} | {r['gemm_ms']:.3f} | {r['ratio']:.2f} | "
              f"{r['conv_tflops']:.1f} | {r['gemm_tflops']:.1f} | {r['gemm']} | "
              f"{r['rel_error']:.1e} |")
    for config in configs:
        for direction in DIRECTIONS:
            sel = [r for r in rows if r["config"] == config and r["direction"] == direction]
            if sel:
                conv = sum(r["conv_ms"] for r in sel)
                best = sum(min(r["conv_ms"], r["gemm_ms"]) for r in sel)
                print(f"{config} {direction}: {len(sel)} rows, conv {conv:.3f} ms, "
                      f"the faster of the two {best:.3f} ms ({best / conv:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                           gpu=torch.cuda.get_device_name(0), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
