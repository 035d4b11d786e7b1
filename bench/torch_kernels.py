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
frontend, which logs the execution plans it times, named by their engine and knob values (a
plan's tag, e.g. ConvBwdFilter_eng62_k25=2), with the time it measured for each. After the
kernels, every search's plans are printed fastest first (PyTorch runs the first that executes),
each with the id dnnx gives the same configuration (cudnn:engine:62:workspace=2). The log names
no layers: its searches are matched to the layer-directions in the order they ran, and printed
unmatched when their count differs (a search not logged).
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_gpu import DIRECTIONS, output_size, read_shapes_file, torch_kernels  # noqa: E402


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PLAN_TIME = re.compile(r"\[cudnn_frontend\] Plan (\S+) took\s+([0-9.eE+-]+)")
SEARCH_END = re.compile(r"\[cudnn_frontend\] Auto-tuning returns \d+ plans")
ENGINE_TAG = re.compile(r"_eng(\d+)((?:_k\d+=-?\d+)*)$")


def knob_names():
    """cudnnBackendKnobType_t's names as dnnx spells them in its ids, read from the table in
    src/backends/cudnn/graph_util.cpp (empty if that file is not there: ids then say k<N>)."""
    try:
        with open(os.path.join(ROOT, "src", "backends", "cudnn", "graph_util.cpp")) as f:
            text = f.read()
    except OSError:
        return []
    table = re.search(r"knob_names\{(.*?)\};", text, re.S)
    return re.findall(r'"(\w+)"', table.group(1)) if table else []


def dnnx_id(tag, names):
    """The dnnx id of the engine configuration a frontend plan tag names (e.g.
    ConvBwdFilter_eng62_k25=2 -> cudnn:engine:62:workspace=2), or None for another tag."""
    match = ENGINE_TAG.search(tag)
    if not match:
        return None
    knobs = []
    for knob in re.findall(r"_k(\d+)=(-?\d+)", match.group(2)):
        kind = int(knob[0])
        knobs.append(f"{names[kind] if kind < len(names) else 'k' + knob[0]}={knob[1]}")
    return f"cudnn:engine:{match.group(1)}" + (":" + ",".join(knobs) if knobs else "")


def frontend_searches(text):
    """The autotuning runs of a frontend log, in order: each the (tag, ms) of its timed plans."""
    searches, current = [], []
    for line in text.splitlines():
        timed = PLAN_TIME.search(line)
        if timed:
            current.append((timed.group(1), float(timed.group(2))))
        elif SEARCH_END.search(line):
            searches.append(current)
            current = []
    if current:
        searches.append(current)
    return searches


def print_searches(searches, labels, names):
    """Each search's plans fastest first, under its layer-direction when the counts agree."""
    if len(searches) != len(labels):
        print(f"\nthe frontend's log holds {len(searches)} searches for {len(labels)} "
              "layer-directions: printed in order, unmatched")
        labels = [f"search {i + 1}" for i in range(len(searches))]
    for label, plans in zip(labels, searches):
        print(f"\n{label}: the frontend's timing of PyTorch's search, fastest (its pick) first")
        for tag, ms in sorted(plans, key=lambda plan: plan[1]):
            print(f"  {ms:10.4f} ms  {tag}  {dnnx_id(tag, names) or ''}")


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
    labels = []  # the layer-directions searched, in order
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
                labels.append(f"{name} {config} {direction}")
                for _ in range(3):  # the benchmark's search, outside the profile
                    fn()
                for k in torch_kernels(torch, fn, args.calls):
                    print(f"  {k['us'] / k['launches']:9.2f} us x {k['launches']:g}  {k['name']}")
    if args.frontend_log:
        with open(args.frontend_log, errors="replace") as f:
            print_searches(frontend_searches(f.read()), labels, knob_names())


if __name__ == "__main__":
    main()
