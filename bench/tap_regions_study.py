#!/usr/bin/env python3
"""Would skipping the kernel taps that read only padding beat cuDNN on dilated convolutions?
PyTorch alone.

A 3x3 convolution of dilation d and padding d on an image not much larger than 2d reads padding
with many of its taps: DeepLabV3's ASPP layers (65x65, dilations 12, 24 and 36) have 77%, 57% and
40% of their tap-pixel products on real input, and those three layers take 56-58% of DeepLabV3's
convolution time in the suite, fp16 and fp32 alike (docs/benchmarks.md). cuDNN computes every
product. Along each spatial dimension the output splits into segments on which the set of valid
taps is one fixed range (an output position o reads tap t when 0 <= o + t*d - pad < size); on
the product of such segments the convolution is a smaller one, with the kernel cut to those
taps, on a crop of the input, with no padding. This measures, with PyTorch alone, whether the
sum of those smaller convolutions beats the whole one, per direction:
  fwd          each output box written by its own convolution,
  bwd_data     each box's input-gradient added into its input crop,
  bwd_weights  each box's weight gradient added into its taps,
in two splits: `boxes` (segments of both dimensions: at most 9 convolutions for a 3x3) and
`rows` (segments of the first dimension only, the second keeping its taps and padding: at most
3). Timed as bench/gemm_1x1_study.py times (CUDA events around loops of `--loop` calls, median of
three loops), cudnn.benchmark=True for every convolution, TF32 off, each result checked against
the whole convolution's.

  python3 bench/tap_regions_study.py [--files deeplabv3] [--configs f16_nhwc,f32_nchw]
      [--max-fraction 0.8] [--json out.json] [--dry-run] [--device cpu]

Layers: the ungrouped 2-D layers of stride 1 whose share of valid tap-pixel products is under
--max-fraction. --device cpu runs each layer once at batch 1 with at most 16 channels (the
spatial size kept: the split depends on it), to check the arithmetic without a GPU.
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


def segments(size, kernel, dilation, pad):
    """The output of one dimension (stride 1) split where its set of valid taps changes:
    [(begin, end, first tap, last tap)], empty sets left out."""
    out = size + 2 * pad - dilation * (kernel - 1)
    cuts = {0, out}
    for t in range(kernel):
        for edge in (pad - t * dilation, size + pad - t * dilation):
            if 0 < edge < out:
                cuts.add(edge)
    cuts = sorted(cuts)
    result = []
    for begin, end in zip(cuts, cuts[1:]):
        taps = [t for t in range(kernel) if 0 <= begin + t * dilation - pad < size]
        if taps:
            result.append((begin, end, taps[0], taps[-1]))
    return result


def valid_fraction(s):
    """The share of a layer's tap-pixel products that read real input."""
    total = valid = 1
    for size, k, d, p in zip(s["spatial"], s["kernel"], s.get("dilation", [1, 1]), s["pad"]):
        out = size + 2 * p - d * (k - 1)
        total *= out * k
        valid *= sum((end - begin) * (last - first + 1)
                     for begin, end, first, last in segments(size, k, d, p))
    return valid / total


def study_layers(path, max_fraction):
    shapes, batch = read_shapes_file(path, "all")
    keep = [s for s in shapes
            if len(s["spatial"]) == 2 and s["groups"] == 1 and s["stride"] == [1, 1]
            and s["kernel"] != [1, 1] and valid_fraction(s) < max_fraction]
    return batch, keep


def study_layer(torch, s, batch, config, loop, device):
    dev = torch.device(device)
    dtype = torch.float32 if config.startswith("f32") else torch.float16
    if device == "cpu":
        dtype = torch.float32
    fmt = torch.channels_last if config.endswith("nhwc") else torch.contiguous_format
    n, c, k = batch, s["c"], s["o"]
    if device == "cpu":
        c, k = min(c, 16), min(k, 16)
    h, w = s["spatial"]
    kh, kw = s["kernel"]
    dh, dw = s.get("dilation", [1, 1])
    ph, pw = s["pad"]
    oh, ow = h + 2 * ph - dh * (kh - 1), w + 2 * pw - dw * (kw - 1)

    def tensor(*dims):
        return torch.empty(*dims, device=dev, dtype=dtype).uniform_(-1, 1).contiguous(
            memory_format=fmt)

    x, wt, dy = tensor(n, c, h, w), tensor(k, c, kh, kw), tensor(n, k, oh, ow)

    def conv(direction, x, wt, dy, pad):
        if direction == "fwd":
            return torch.ops.aten.convolution(x, wt, None, [1, 1], pad, [dh, dw], False, [0, 0], 1)
        mask = [direction == "bwd_data", direction == "bwd_weights", False]
        return torch.ops.aten.convolution_backward(
            dy, x, wt, None, [1, 1], pad, [dh, dw], False, [0, 0], 1,
            mask)[0 if direction == "bwd_data" else 1]

    rows_h = segments(h, kh, dh, ph)
    split = {"boxes": [(a, b) for a in rows_h for b in segments(w, kw, dw, pw)],
             "rows": [(a, None) for a in rows_h]}

    def decomposed(direction, boxes):
        out = torch.zeros_like({"fwd": dy, "bwd_data": x, "bwd_weights": wt}[direction])
        for (o0, o1, t0, t1), second in boxes:
            i0, i1 = o0 + t0 * dh - ph, o1 - 1 + t1 * dh - ph + 1
            if second is None:  # the second dimension whole: all its taps, its padding
                u0, u1, q0, q1, pad = 0, ow, 0, kw - 1, [0, pw]
                j0, j1 = 0, w
            else:
                u0, u1, q0, q1 = second
                j0, j1 = u0 + q0 * dw - pw, u1 - 1 + q1 * dw - pw + 1
                pad = [0, 0]
            xs = x[:, :, i0:i1, j0:j1]
            ws = wt[:, :, t0:t1 + 1, q0:q1 + 1]
            ys = dy[:, :, o0:o1, u0:u1]
            if direction == "fwd":
                out[:, :, o0:o1, u0:u1] = conv("fwd", xs, ws, None, pad)
            elif direction == "bwd_data":
                out[:, :, i0:i1, j0:j1] += conv("bwd_data", xs, ws, ys, pad)
            else:
                out[:, :, t0:t1 + 1, q0:q1 + 1] += conv("bwd_weights", xs, ws, ys, pad)
        return out

    flops = 2.0 * n * oh * ow * c * kh * kw * k
    rows = []
    for direction in DIRECTIONS:
        def whole():
            return conv(direction, x, wt, dy, [ph, pw])
        reference = whole()
        row = dict(layer=s["name"], direction=direction, config=config, batch=n,
                   shape=f"{n}x{c}x{h}x{w} * {k}x{c}x{kh}x{kw} p{s['pad']} d{[dh, dw]}",
                   valid=valid_fraction(s), conv_tflops=None)
        row["conv_ms"] = float("nan") if device == "cpu" else time_ms(torch, whole, loop)
        row["conv_tflops"] = flops / row["conv_ms"] / 1e9
        for name, boxes in split.items():
            def ours():
                return decomposed(direction, boxes)
            row[f"{name}_count"] = len(boxes)
            row[f"{name}_error"] = relative_error(torch, ours(), reference)
            row[f"{name}_ms"] = float("nan") if device == "cpu" else time_ms(torch, ours, loop)
            row[f"{name}_ratio"] = row[f"{name}_ms"] / row["conv_ms"]
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", default="deeplabv3,unet,odd_sizes",
                        help="comma-separated shapes files (names or paths)")
    parser.add_argument("--configs", default="f16_nhwc,f32_nchw")
    parser.add_argument("--max-fraction", type=float, default=0.8,
                        help="study layers whose valid share of tap-pixel products is under this")
    parser.add_argument("--loop", type=int, default=20)
    parser.add_argument("--json", default="")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    paths = shapes_paths(args.files)
    configs = [c for c in args.configs.split(",") if c]
    plan = []
    for path in paths:
        batch, layers = study_layers(path, args.max_fraction)
        plan += [(os.path.basename(path), batch or 1, s) for s in layers]
    if args.dry_run or not plan:
        for file, batch, s in plan:
            h, w = s["spatial"]
            print(f"{file} {s['name']}: {batch}x{s['c']}x{h}x{w} -> {s['o']} k{s['kernel']} "
                  f"p{s['pad']} d{s.get('dilation', [1, 1])}: valid {valid_fraction(s):.3f}, "
                  f"rows {segments(h, s['kernel'][0], s.get('dilation', [1, 1])[0], s['pad'][0])}")
        print(f"{len(plan)} layers x 3 directions x {len(configs)} configs")
        return
    torch = torch_or_skip("tap_regions_study")
    started = time.time()
    rows = study_plan(plan, configs, lambda s, batch, config: study_layer(
        torch, s, 1 if args.device == "cpu" else batch, config, args.loop, args.device))
    print("| file | layer | config | dir | shape | valid | conv ms | boxes (n) ms | boxes/conv "
          "| rows (n) ms | rows/conv | rel. error |")
    print("|---|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        error = max(r["boxes_error"], r["rows_error"])
        print(f"| {r['file']} | {r['layer']} | {r['config']} | {r['direction']} | {r['shape']} "
              f"| {r['valid']:.2f} | {r['conv_ms']:.3f} | {r['boxes_ms']:.3f} "
              f"({r['boxes_count']}) | {r['boxes_ratio']:.2f} | {r['rows_ms']:.3f} "
              f"({r['rows_count']}) | {r['rows_ratio']:.2f} | {error:.1e} |")
    worst = max((max(r["boxes_error"], r["rows_error"]) for r in rows), default=0.0)
    limit = 1e-4 if args.device == "cpu" else 5e-3  # fp16 sums in another order
    finish_study("tap_regions_study", args, torch, rows, worst, started, limit,
                 "the convolution's")


if __name__ == "__main__":
    main()
