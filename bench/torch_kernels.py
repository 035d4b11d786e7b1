#!/usr/bin/env python3
"""The GPU kernels PyTorch runs for layers of a shapes file, as the GPU comparison sets it up
(`cudnn.benchmark=True`, TF32 off; bench/compare_gpu.py): per layer, config and direction, each
kernel's name, its launches per call and its mean time per launch, from PyTorch's profiler over
a loop of calls after the benchmark's search. For a row where PyTorch is ahead, this names what
it runs (cuDNN's kernel, or one of PyTorch's own), to set against dnnx's candidates (`dnnx
profile conv ... --json`). Needs a CUDA PyTorch.

    torch_kernels.py --shapes bench/shapes/FILE.txt --layers NAME[,NAME] [--configs f16_nhwc]
                     [--directions fwd,bwd_data,bwd_weights] [--batch N] [--calls 20]
                     [--frontend-log FILE]

--frontend-log FILE turns on the cuDNN frontend's log (CUDNN_FRONTEND_LOG_INFO=1,
CUDNN_FRONTEND_LOG_FILE=FILE) before PyTorch loads: PyTorch's benchmark search goes through the
frontend, which logs the execution plans it builds and times, named by their engine and knob
values (a plan's tag, e.g. eng62_k2=1), so the file tells which engine configuration PyTorch's
search ran and chose, to set against dnnx's ids (cudnn:engine:62:...). The log keeps no layer
names: give one layer and direction per run.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_gpu import DIRECTIONS, output_size, read_shapes_file  # noqa: E402


def kernels_of(fn, calls):
    """[(name, launches per call, mean us per launch)] of the CUDA kernels `fn` launches."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        if event.device_type != torch.autograd.DeviceType.CUDA or event.count == 0:
            continue
        total_us = getattr(event, "device_time_total", None)
        if total_us is None:
            total_us = event.cuda_time_total
        rows.append((event.key, event.count / calls, total_us / event.count))
    return sorted(rows, key=lambda r: -r[1] * r[2])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--layers", required=True, help="layer names, comma-separated")
    parser.add_argument("--configs", default="f16_nhwc")
    parser.add_argument("--directions", default=",".join(DIRECTIONS))
    parser.add_argument("--batch", type=int)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--frontend-log", help="the cuDNN frontend's log into this file")
    args = parser.parse_args()
    if args.frontend_log:
        # Read when the frontend logs first: set before PyTorch (and cuDNN) load.
        os.environ["CUDNN_FRONTEND_LOG_INFO"] = "1"
        os.environ["CUDNN_FRONTEND_LOG_FILE"] = args.frontend_log

    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    shapes, file_batch = read_shapes_file(args.shapes, "all")
    batch = args.batch or file_batch
    if batch is None:
        parser.error(f"{args.shapes} names no batch: give --batch")
    wanted = args.layers.split(",")
    by_name = {s["name"]: s for s in shapes}
    missing = [name for name in wanted if name not in by_name]
    if missing:
        parser.error(f"{args.shapes} has no layer {', '.join(missing)}")
    directions = args.directions.split(",")
    for direction in directions:
        if direction not in DIRECTIONS:
            parser.error(f"--directions: '{direction}' is not one of {', '.join(DIRECTIONS)}")
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name(0)}")
    for config in args.configs.split(","):
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[
            config.split("_")[0]]
        for name in wanted:
            s = by_name[name]
            rank = len(s["spatial"])
            fmt = torch.contiguous_format
            if config.endswith("nhwc"):
                fmt = {2: torch.channels_last, 3: torch.channels_last_3d}.get(rank, fmt)
            dev = torch.device("cuda")
            x = (torch.rand(batch, s["c"], *s["spatial"], device=dev, dtype=dtype) * 2 - 1
                 ).contiguous(memory_format=fmt)
            w = (torch.rand(s["o"], s["cg"], *s["kernel"], device=dev, dtype=dtype) * 2 - 1
                 ).contiguous(memory_format=fmt)
            dy = (torch.rand(batch, s["o"], *output_size(s), device=dev, dtype=dtype) * 2 - 1
                  ).contiguous(memory_format=fmt)
            conv = (s["stride"], s["pad"], s["dilation"], False, [0] * rank, s["groups"])
            for direction in directions:
                if direction == "fwd":
                    def fn():
                        return torch.ops.aten.convolution(x, w, None, *conv)
                else:
                    mask = [direction == "bwd_data", direction == "bwd_weights", False]

                    def fn():
                        return torch.ops.aten.convolution_backward(dy, x, w, None, *conv, mask)
                print(f"\n{name} {config} {direction} (batch {batch}):")
                for kernel, launches, us in kernels_of(fn, args.calls):
                    print(f"  {us:9.2f} us x {launches:g}  {kernel}")


if __name__ == "__main__":
    main()
