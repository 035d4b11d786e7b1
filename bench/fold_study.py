#!/usr/bin/env python3
"""Would a 3-D convolution with a trivial dimension beat cuDNN run as a 2-D one? PyTorch alone.

R(2+1)D factors each 3x3x3 convolution into a 1x3x3 "spatial" one and a 3x1x1 "temporal" one,
and both go to cuDNN as 3-D convolutions, where the 2-D algorithms that win ResNet-50's fp32 3x3
layers (legacy `fft_tiling` and `winograd_nonfused`: 0.34-0.68 of PyTorch on an H100,
docs/benchmarks.md) do not exist. In the suite dnnx and PyTorch run the same 3-D engines on R(2+1)D
in fp32 (0.95 of PyTorch in all; l1.spatial's bwd_weights alone 13.7 ms of 91.8, at 15 TFLOP/s).
Both factors are 2-D convolutions in disguise:
  frames  a kernel of depth 1 (no depth padding): every output frame is a 2-D convolution of one
          input frame (every stride-th), so the whole layer is one 2-D convolution over N x T'
          images. In NDHWC that is a view of the same memory; in NCDHW the frames are strided
          (the depth between the channels and the rows), so here they are copied into NCHW and
          back (dnnx's frame candidates run one 2-D call per frame on strided views instead:
          Note [frame candidates] in src/backends/cudnn/conv_frames.cpp).
  planes  a kernel of height and width 1 (no padding, stride 1 there): a 2-D convolution over
          (T, H*W) with a Tx1 kernel, a view of the same memory in both layouts.
This measures, per such layer and direction, torch's 3-D convolution (cudnn.benchmark=True)
against torch's 2-D convolution of the folded tensors: the 2-D kernel alone (its operands already
folded) and, where the fold is a copy, with the copies in and out. Timed as
bench/gemm_1x1_study.py times (CUDA events around loops of `--loop` calls, median of three loops),
TF32 off, each result checked against the 3-D convolution's.

  python3 bench/fold_study.py [--files r2plus1d_18] [--configs f32_nchw,f16_nhwc]
      [--json out.json] [--dry-run] [--device cpu]

--device cpu runs each layer once at batch 1 with at most 8 channels and 6 frames of at most
10x10 (the folds do not depend on the sizes), to check the arithmetic without a GPU.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_gpu import read_shapes_file  # noqa: E402
from gemm_1x1_study import (DIRECTIONS, finish_study, relative_error, shapes_paths,  # noqa: E402
                            study_plan, time_ms, torch_or_skip)


def fold_of(s):
    """"frames", "planes" or None for a layer of a shapes file."""
    if len(s["spatial"]) != 3:
        return None
    kernel, stride, pad = s["kernel"], s["stride"], s["pad"]
    dilation = s.get("dilation", [1, 1, 1])
    if kernel[0] == 1 and pad[0] == 0 and kernel[1:] != [1, 1]:
        return "frames"
    if kernel[1:] == [1, 1] and pad[1:] == [0, 0] and stride[1:] == [1, 1] and kernel[0] > 1 \
            and dilation[1:] == [1, 1]:
        return "planes"
    return None


def fold_layers(path):
    shapes, batch = read_shapes_file(path, "all")
    return batch, [s for s in shapes if fold_of(s)]


def study_layer(torch, s, batch, config, loop, device):
    conv = torch.ops.aten.convolution
    backward = torch.ops.aten.convolution_backward
    dev = torch.device(device)
    dtype = torch.float32 if config.startswith("f32") else torch.float16
    last = config.endswith("nhwc")
    fold = fold_of(s)
    n, c, k, groups = batch, s["c"], s["o"], s["groups"]
    t, h, w = s["spatial"]
    if device == "cpu":
        c, k, groups = min(c, 8), min(k, 8), 1
        t, h, w = min(t, 6), min(h, 10), min(w, 10)
    kt, kh, kw = s["kernel"]
    stride, pad = list(s["stride"]), list(s["pad"])
    dilation = list(s.get("dilation", [1, 1, 1]))
    out = [(size + 2 * p - d * (kk - 1) - 1) // st + 1
           for size, kk, st, p, d in zip((t, h, w), (kt, kh, kw), stride, pad, dilation)]
    if min(out) < 1:
        return []
    ot, oh, ow = out
    fmt3 = torch.channels_last_3d if last else torch.contiguous_format
    fmt2 = torch.channels_last if last else torch.contiguous_format

    def make(*shape):
        return torch.empty(*shape, device=dev, dtype=dtype).uniform_(-1, 1) \
            .contiguous(memory_format=fmt3 if len(shape) == 5 else fmt2)

    x = make(n, c, t, h, w)
    wt = make(k, c // groups, kt, kh, kw)
    dy = make(n, k, ot, oh, ow)

    # The folded operands and the 2-D geometry.
    if fold == "frames":
        def fold_in(v, step):  # [N, C, T, H, W] -> [N*T', C, H, W], every step-th frame
            v = v[:, :, ::step].permute(0, 2, 1, 3, 4)
            return v.reshape(-1, v.shape[2], v.shape[3], v.shape[4]).contiguous(memory_format=fmt2)

        def fold_out(v, frames):  # [N*T', C, H, W] -> [N, C, T', H, W]
            return v.reshape(n, frames, v.shape[1], v.shape[2], v.shape[3]).permute(0, 2, 1, 3, 4)

        w2 = wt[:, :, 0].contiguous(memory_format=fmt2)
        geometry = ([stride[1], stride[2]], [pad[1], pad[2]], [dilation[1], dilation[2]])
        copies = not last  # NDHWC folds as a view
    else:
        def fold_in(v, step):  # [N, C, T, H, W] -> [N, C, T, H*W]
            return v.reshape(v.shape[0], v.shape[1], v.shape[2], -1)

        def fold_out(v, frames):  # [N, C, T, H*W] -> [N, C, T, H, W] (H, W kept by the fold)
            return v.reshape(n, v.shape[1], v.shape[2], h, w)

        w2 = wt.reshape(wt.shape[0], wt.shape[1], kt, 1).contiguous(memory_format=fmt2)
        geometry = ([stride[0], 1], [pad[0], 0], [dilation[0], 1])
        copies = False
    st2, pad2, dil2 = geometry
    x2 = fold_in(x, stride[0] if fold == "frames" else 1)
    dy2 = fold_in(dy, 1)

    def conv3(direction):
        if direction == "fwd":
            return lambda: conv(x, wt, None, stride, pad, dilation, False, [0, 0, 0], groups)
        mask = [direction == "bwd_data", direction == "bwd_weights", False]
        index = 0 if direction == "bwd_data" else 1
        return lambda: backward(dy, x, wt, None, stride, pad, dilation, False, [0, 0, 0], groups,
                                mask)[index]

    def conv2(direction, xs, dys):
        if direction == "fwd":
            return conv(xs, w2, None, st2, pad2, dil2, False, [0, 0], groups)
        mask = [direction == "bwd_data", direction == "bwd_weights", False]
        index = 0 if direction == "bwd_data" else 1
        return backward(dys, xs, w2, None, st2, pad2, dil2, False, [0, 0], groups, mask)[index]

    def unfolded(direction, result):
        """The 2-D result in the 3-D operand's shape."""
        if direction == "bwd_weights":
            return result.reshape(wt.shape)
        if direction == "fwd":
            return fold_out(result, ot)
        if fold == "planes":
            return fold_out(result, t)
        dx = torch.zeros_like(x)  # frames a strided depth skips get no gradient
        dx[:, :, ::stride[0]] = fold_out(result, result.shape[0] // n)
        return dx

    def kernel_only(direction):
        return lambda: conv2(direction, x2, dy2)

    def with_copies(direction):
        return lambda: unfolded(direction, conv2(direction,
                                                 fold_in(x, stride[0] if fold == "frames" else 1),
                                                 fold_in(dy, 1))).contiguous(memory_format=fmt3)

    flops = 2.0 * n * ot * oh * ow * (c // groups) * kt * kh * kw * k
    rows = []
    for direction in DIRECTIONS:
        reference = conv3(direction)()
        error = relative_error(torch, unfolded(direction, kernel_only(direction)()), reference)
        row = dict(layer=s["name"], direction=direction, config=config, fold=fold, batch=n,
                   shape=f"{n}x{c}x{t}x{h}x{w} * {k}x{c // groups}x{kt}x{kh}x{kw} s{stride} "
                         f"p{pad}" + (f" g{groups}" if groups > 1 else ""),
                   rel_error=error)
        if device == "cpu":
            row.update(conv_ms=float("nan"), fold_ms=float("nan"), copies_ms=float("nan"))
        else:
            row["conv_ms"] = time_ms(torch, conv3(direction), loop)
            row["fold_ms"] = time_ms(torch, kernel_only(direction), loop)
            row["copies_ms"] = (time_ms(torch, with_copies(direction), loop) if copies
                                else row["fold_ms"])
        row["fold_ratio"] = row["fold_ms"] / row["conv_ms"]
        row["copies_ratio"] = row["copies_ms"] / row["conv_ms"]
        row["conv_tflops"] = flops / row["conv_ms"] / 1e9
        row["fold_tflops"] = flops / row["fold_ms"] / 1e9
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="r2plus1d_18",
                        help="comma-separated shapes files (names or paths)")
    parser.add_argument("--configs", default="f32_nchw,f16_nhwc")
    parser.add_argument("--loop", type=int, default=20)
    parser.add_argument("--json", default="")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    plan = []
    for path in shapes_paths(args.files):
        batch, layers = fold_layers(path)
        plan += [(os.path.basename(path), batch or 1, s) for s in layers]
    if args.dry_run or not plan:
        for file, batch, s in plan:
            print(f"{file} {s['name']}: {batch}x{s['c']}x{'x'.join(map(str, s['spatial']))} -> "
                  f"{s['o']} k{s['kernel']} s{s['stride']} p{s['pad']}: {fold_of(s)}")
        print(f"{len(plan)} layers x 3 directions x {len(configs)} configs")
        return
    torch = torch_or_skip("fold_study")
    started = time.time()
    rows = study_plan(plan, configs, lambda s, batch, config: study_layer(
        torch, s, 1 if args.device == "cpu" else batch, config, args.loop, args.device))
    print("| file | layer | config | dir | fold | shape | 3-D ms | 2-D ms | 2-D/3-D | with copies "
          "ms | with copies/3-D | 3-D TFLOP/s | 2-D TFLOP/s | rel. error |")
    print("|---|---|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['file']} | {r['layer']} | {r['config']} | {r['direction']} | {r['fold']} "
              f"| {r['shape']} | {r['conv_ms']:.3f} | {r['fold_ms']:.3f} | {r['fold_ratio']:.2f} "
              f"| {r['copies_ms']:.3f} | {r['copies_ratio']:.2f} | {r['conv_tflops']:.1f} "
              f"| {r['fold_tflops']:.1f} | {r['rel_error']:.1e} |")
    for config in configs:
        mine = [r for r in rows if r["config"] == config]
        conv_total = sum(r["conv_ms"] for r in mine)
        best_total = sum(min(r["conv_ms"], r["copies_ms"]) for r in mine)
        print(f"{config}: the 3-D convolutions {conv_total:.3f} ms; each row at the better of "
              f"3-D and folded (copies included) {best_total:.3f} ms")
    worst = max((r["rel_error"] for r in rows), default=0.0)
    limit = 1e-4 if args.device == "cpu" else 5e-3  # fp16 sums in another order
    finish_study("fold_study", args, torch, rows, worst, started, limit,
                 "the 3-D convolution's")


if __name__ == "__main__":
    main()
