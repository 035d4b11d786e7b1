#!/usr/bin/env python3
"""Would a column matrix and a GEMM beat cuDNN on the suite's fp32 convolutions? PyTorch alone.

dnnx's im2col candidates (Note [im2col candidates] in src/backends/cudnn/conv_im2col.cpp) copy
what every kernel tap reads into a column matrix and run the convolution as a matrix product,
for the fp32 layers where cuDNN's engines reach 23-40 TFLOP/s on an H200 and cuBLASLt's fp32
GEMMs 50 (docs/benchmarks.md). This measures the same with PyTorch alone, to tell the method's
worth from the quality of dnnx's kernels: per ungrouped 2-D layer that is no 1x1 product, and per
direction, torch's convolution under cudnn.benchmark=True against
  fwd          F.unfold(src) then weights {K, C*taps} @ cols (a batched product, weights shared),
  bwd_data     weights^T @ diff_dst then F.fold (the column matrix summed back),
  bwd_weights  F.unfold(src) then diff_dst @ cols^T summed over the batch,
each timed whole (unfold and fold included), as bench/gemm_1x1_study.py times (CUDA events
around loops of `--loop` calls, median of three loops), TF32 off, the result checked against the
convolution's. A layer whose column matrix for the whole batch is over --max-col-gib is done in
as many equal parts of the batch as it takes, as dnnx's passes are.

  python3 bench/im2col_study.py [--files unet,r2plus1d_18] [--configs f32_nchw]
      [--json out.json] [--max-layers N] [--dry-run] [--device cpu]

--device cpu runs every layer once at batch 1 with its spatial size cut to at most 16, to check
the arithmetic without a GPU (no timing worth reading). 3-D layers are left out (F.unfold is
2-D only).
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_gpu import read_shapes_file  # noqa: E402
from gemm_1x1_study import (DIRECTIONS, finish_study, relative_error, shapes_paths,  # noqa: E402
                            time_ms, torch_or_skip)


def im2col_layers(path):
    """(batch, layers) of a shapes file: its ungrouped 2-D layers that are no 1x1 product."""
    shapes, batch = read_shapes_file(path, "all")
    keep = [s for s in shapes
            if len(s["spatial"]) == 2 and s["groups"] == 1
            and not (s["kernel"] == [1, 1] and s["stride"] == [1, 1] and s["pad"] == [0, 0])]
    return batch, keep


def study_layer(torch, s, batch, loop, device, max_col_bytes):
    import torch.nn.functional as F

    dev = torch.device(device)
    dtype = torch.float32
    n, c, k = batch, s["c"], s["o"]
    h, w = s["spatial"]
    if device == "cpu":
        h, w = min(h, 16), min(w, 16)
    kh, kw = s["kernel"]
    stride, pad = s["stride"], s["pad"]
    dilation = s.get("dilation", [1, 1])
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh < 1 or ow < 1:
        return []
    x = torch.empty(n, c, h, w, device=dev, dtype=dtype).uniform_(-1, 1)
    wt = torch.empty(k, c, kh, kw, device=dev, dtype=dtype).uniform_(-1, 1)
    dy = torch.empty(n, k, oh, ow, device=dev, dtype=dtype).uniform_(-1, 1)
    w2 = wt.view(k, c * kh * kw)
    geometry = dict(kernel_size=(kh, kw), dilation=tuple(dilation), padding=tuple(pad),
                    stride=tuple(stride))
    sample_col = c * kh * kw * oh * ow * 4
    part = max(d for d in range(1, n + 1) if n % d == 0 and d * sample_col <= max_col_bytes) \
        if sample_col <= max_col_bytes else 0
    if part == 0:
        return []

    def conv(direction):
        if direction == "fwd":
            return lambda: torch.ops.aten.convolution(x, wt, None, stride, pad, dilation, False,
                                                      [0, 0], 1)
        mask = [direction == "bwd_data", direction == "bwd_weights", False]
        index = 0 if direction == "bwd_data" else 1
        return lambda: torch.ops.aten.convolution_backward(
            dy, x, wt, None, stride, pad, dilation, False, [0, 0], 1, mask)[index]

    def fwd():
        outs = [torch.matmul(w2, F.unfold(x[i:i + part], **geometry))
                for i in range(0, n, part)]
        return torch.cat(outs).view(n, k, oh, ow)

    def bwd_data():
        outs = [F.fold(torch.matmul(w2.t(), dy[i:i + part].reshape(part, k, oh * ow)), (h, w),
                       **geometry) for i in range(0, n, part)]
        return torch.cat(outs)

    def bwd_weights():
        total = None
        for i in range(0, n, part):
            cols = F.unfold(x[i:i + part], **geometry)
            piece = torch.matmul(dy[i:i + part].reshape(part, k, oh * ow),
                                 cols.transpose(1, 2)).sum(0)
            total = piece if total is None else total + piece
        return total.view(k, c, kh, kw)

    ours = {"fwd": fwd, "bwd_data": bwd_data, "bwd_weights": bwd_weights}
    flops = 2.0 * n * oh * ow * c * kh * kw * k
    rows = []
    for direction in DIRECTIONS:
        reference = conv(direction)()
        error = relative_error(torch, ours[direction](), reference)
        if device == "cpu":
            conv_ms = im2col_ms = float("nan")
        else:
            conv_ms = time_ms(torch, conv(direction), loop)
            im2col_ms = time_ms(torch, ours[direction], loop)
        rows.append(dict(layer=s["name"], direction=direction, config="f32_nchw", batch=n,
                         shape=f"{n}x{c}x{h}x{w} * {k}x{c}x{kh}x{kw} s{stride} p{pad} d{dilation}",
                         passes=n // part, conv_ms=conv_ms, im2col_ms=im2col_ms,
                         ratio=im2col_ms / conv_ms, rel_error=error,
                         conv_tflops=flops / conv_ms / 1e9, im2col_tflops=flops / im2col_ms / 1e9))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="unet,r2plus1d_18,deeplabv3,resnet50,resnext50_32x4d",
                        help="comma-separated shapes files (names or paths)")
    parser.add_argument("--loop", type=int, default=20)
    parser.add_argument("--max-layers", type=int, default=0, help="per file; 0: every one")
    parser.add_argument("--max-col-gib", type=float, default=1.0)
    parser.add_argument("--json", default="")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    paths = shapes_paths(args.files)
    plan = []
    for path in paths:
        batch, layers = im2col_layers(path)
        if args.max_layers > 0:
            layers = layers[:args.max_layers]
        plan += [(os.path.basename(path), batch or 1, s) for s in layers]
    if args.dry_run:
        for file, batch, s in plan:
            h, w = s["spatial"]
            print(f"{file} {s['name']}: {batch}x{s['c']}x{h}x{w} -> {s['o']} k{s['kernel']} "
                  f"s{s['stride']} p{s['pad']}")
        print(f"{len(plan)} layers x 3 directions")
        return
    torch = torch_or_skip("im2col_study")
    rows = []
    started = time.time()
    for file, batch, s in plan:
        for row in study_layer(torch, s, 1 if args.device == "cpu" else batch, args.loop,
                               args.device, int(args.max_col_gib * (1 << 30))):
            row["file"] = file
            rows.append(row)
    print("| file | layer | dir | shape | passes | conv ms | im2col ms | im2col/conv "
          "| conv TFLOP/s | im2col TFLOP/s | rel. error |")
    print("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['file']} | {r['layer']} | {r['direction']} | {r['shape']} | {r['passes']} | "
              f"{r['conv_ms']:.3f} | {r['im2col_ms']:.3f} | {r['ratio']:.2f} | "
              f"{r['conv_tflops']:.1f} | {r['im2col_tflops']:.1f} | {r['rel_error']:.1e} |")
    worst = max((r["rel_error"] for r in rows), default=0.0)
    finish_study("im2col_study", args, torch, rows, worst, started, 1e-4, "the convolution's")


if __name__ == "__main__":
    main()
