#!/usr/bin/env python3
"""dnnx and PyTorch on the same convolution rows in one process, their timed loops taking turns.

The shape suite (compare_gpu.py --suite) times dnnx in its C++ benchmark and PyTorch in another
process, round after round (Note [suite rounds]). A row where both sides run kernels of about the
same speed can then read above 1.00 in one run and below in the next: the GPU's clocks and what
its L2 and memory went through before differ between the processes (docs/benchmarks.md). Here both
sides run in one Python process on the same PyTorch tensors, dnnx through its Python module on
PyTorch's current stream (Note [interleaved turns]):

  python3 bench/interleaved_rows.py --shapes unet --rows d3.conv2:fwd,e3.conv1:bwd_weights \\
      [--configs f16_nhwc] [--batch N] [--turns 7] [--loop 50] [--kernels] [--json OUT]
  python3 bench/interleaved_rows.py --from-suite SUITE.json.gz[,MORE.json.gz] [--files unet,c3d]

--rows takes LAYER:DIRECTION pairs (or --layers A,B with --directions, every pair of both);
--from-suite takes the rows above 1.00 of compare_gpu.py --suite --json files (their raw files
in bench/results), each at its file's batch and in its own config. Per row (or the error that
stopped it: dnnx's or PyTorch's, the other rows still run): dnnx's choice (its
exhaustive search, on these tensors, with DNNX_CACHE as the environment says), both sides' first
call (searches included), each side's gated loop time per turn, the medians and their ratio, and
with --kernels the GPU kernels each side's calls launch (torch.profiler sees both) and whether
the longest is the same kernel on both; per file, how many rows are above 1.00 and how many of
those run PyTorch's own kernel. The module
must be importable (PYTHONPATH; scripts/gpu_jobs.sh's `interleaved` job builds it against the
carried build).
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from compare_gpu import (DIRECTIONS, ShapesError, describe, first_call_ms,  # noqa: E402
                         gated_loop_ms, queued_loop_ms, read_shapes_file, read_suite_json,
                         rows_above_one, sleep_cycles_per_ms, suite_files, torch_call,
                         torch_kernels, torch_operands)


def parse_rows(args, shapes):
    """[(shape line, direction)] from --rows or --layers x --directions, in the order given;
    ShapesError for a layer the file lacks or a direction that is not one."""
    by_name = {s["name"]: s for s in shapes}
    if args.rows:
        pairs = []
        for item in args.rows.split(","):
            layer, sep, direction = item.rpartition(":")
            if not sep or not layer:
                raise ShapesError(f"--rows: '{item}' is not LAYER:DIRECTION")
            pairs.append((layer, direction))
    else:
        layers = args.layers.split(",") if args.layers else [s["name"] for s in shapes]
        pairs = [(layer, d) for layer in layers for d in args.directions.split(",")]
    rows = []
    for layer, direction in pairs:
        if direction not in DIRECTIONS:
            raise ShapesError(f"'{direction}' is not a direction ({', '.join(DIRECTIONS)})")
        if layer not in by_name:
            raise ShapesError(f"no layer '{layer}' in the shapes file (it has: "
                              f"{', '.join(by_name)})")
        rows.append((by_name[layer], direction))
    return rows


def spread(values):
    return max(values) / min(values) if values and min(values) > 0 else 0.0


# Note [interleaved turns]
# Each turn times one gated loop of each side (Note [gated PyTorch loops] in compare_gpu.py: the
# GPU's time alone, the host's queueing hidden behind a sleep of the stream), dnnx first in even
# turns and PyTorch first in odd ones, so that a drift of the clocks over the turns and whatever
# the loop before left in L2 fall on both sides alike. The row's ratio is the ratio of the two
# medians over the turns; `paired` gives each turn's own ratio, whose range says how far one
# turn's comparison can be trusted. dnnx's calls go on PyTorch's current stream (dnnx's Python
# module moves a context onto the caller's stream), so one sleep gates both.
def time_row(torch, dnnx, s, direction, config, batch, args, cycles_per_ms):
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[
        config.split("_")[0]]
    x, w, dy = torch_operands(torch, s, batch, dtype, config)
    torch_fn = torch_call(torch, s, direction, x, w, dy)
    ctx = dnnx.Context("cudnn", 0)
    setattr(ctx.tune, direction, "exhaustive")
    desc = dnnx.ops.conv.desc_for(x, w, s["stride"], s["pad"], s["dilation"], s["groups"])
    conv = dnnx.ops.conv
    if direction == "fwd":
        y = torch.empty_like(dy)
        dnnx_fn = lambda: conv.fwd(desc, x, w, out=y, ctx=ctx)  # noqa: E731
    elif direction == "bwd_data":
        dx = torch.empty_like(x)
        dnnx_fn = lambda: conv.bwd_data(desc, dy, w, out=dx, ctx=ctx)  # noqa: E731
    else:
        dw = torch.empty_like(w)
        dnnx_fn = lambda: conv.bwd_weights(desc, x, dy, out=dw, ctx=ctx)  # noqa: E731
    sides = {"dnnx": dnnx_fn, "torch": torch_fn}
    row = dict(layer=s["name"], direction=direction, config=config, batch=batch,
               desc=describe(s, batch))
    for name, fn in sides.items():
        row[f"{name}_first_call_ms"] = first_call_ms(torch.cuda, fn)
    choice = dnnx.select(desc, direction, ctx)
    row["dnnx_algo"] = choice.id
    host = {name: queued_loop_ms(torch.cuda, fn, args.loop)[0] for name, fn in sides.items()}
    times = {name: [] for name in sides}
    gated = True
    for turn in range(args.turns):
        order = ("dnnx", "torch") if turn % 2 == 0 else ("torch", "dnnx")
        for name in order:
            ms, held = gated_loop_ms(torch.cuda, sides[name], args.loop, host[name],
                                     cycles_per_ms)
            times[name].append(ms)
            gated = gated and held
    for name in sides:
        row[f"{name}_ms"] = times[name]
        row[f"{name}_median_ms"] = statistics.median(times[name])
        row[f"{name}_spread"] = spread(times[name])
    row["ratio"] = row["dnnx_median_ms"] / row["torch_median_ms"]
    row["paired"] = [d / t for d, t in zip(times["dnnx"], times["torch"])]
    row["gated"] = gated
    if args.kernels:
        for name, fn in sides.items():
            row[f"{name}_kernels"] = torch_kernels(torch, fn)
        row["same_kernel"] = main_kernel(row["dnnx_kernels"]) == main_kernel(row["torch_kernels"])
    return row


def kernel_names(kernels):
    return "; ".join(k["name"][:60] for k in kernels[:2])


def main_kernel(kernels):
    """The name of the longest kernel of a call (kernel_summary's order), memsets and cuDNN's
    workspace initialisation aside: what tells two sides' calls apart (its tile in its name)."""
    names = [k["name"] for k in kernels
             if "Memset" not in k["name"] and "init_device_workspace" not in k["name"]]
    return names[0] if names else ""


def summary_line(rows):
    """The rows timed, those above 1.00 (as printed), and of those, how many run the same main
    kernel as PyTorch (where the kernels were listed)."""
    timed = [r for r in rows if "error" not in r]
    above = [r for r in timed if round(r["ratio"], 2) > 1.0]
    same = [r for r in above if r.get("same_kernel")]
    listed = all("same_kernel" in r for r in above)
    return (f"{len(timed)} rows timed ({len(rows) - len(timed)} failed), {len(above)} above 1.00"
            + (f", {len(same)} of them on the same kernel as PyTorch" if above and listed else ""))


def print_rows(rows, kernels):
    print("| layer | direction | config | dnnx ms | torch ms | dnnx/torch | turns' ratios "
          "(min-max) | spread dnnx / torch | dnnx's choice |"
          + (" same kernel | kernels dnnx / torch |" if kernels else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|---|" if kernels else ""))
    for r in rows:
        if "error" in r:
            print(f"| {r['layer']} | {r['direction']} | {r['config']} | failed: "
                  f"{r['error'].splitlines()[0][:200]} |")
            continue
        line = (f"| {r['layer']} | {r['direction']} | {r['config']} | {r['dnnx_median_ms']:.4f} | "
                f"{r['torch_median_ms']:.4f} | {r['ratio']:.3f} | {min(r['paired']):.3f}-"
                f"{max(r['paired']):.3f} | {r['dnnx_spread']:.3f} / {r['torch_spread']:.3f} | "
                f"`{r['dnnx_algo']}` |")
        if kernels:
            line += (f" {'yes' if r['same_kernel'] else 'no'} | {kernel_names(r['dnnx_kernels'])}"
                     f" / {kernel_names(r['torch_kernels'])} |")
        print(line + ("" if r["gated"] else " (a loop ungated)"))
    print(f"\n{summary_line(rows)}")


def plan(args):
    """[(shapes path, batch, [(shape line, direction, config)])]: the rows to time, per shapes
    file, from --shapes with --rows or --layers x --directions in each of --configs, or from
    --from-suite (every row above 1.00 of those files, in its own config). ShapesError for what
    cannot be read or found."""
    configs = args.configs.split(",")
    for config in configs:
        if config not in CONFIGS:
            raise ShapesError(f"--configs: unknown config '{config}' ({', '.join(CONFIGS)})")
    if not args.from_suite:
        if not args.shapes:
            raise ShapesError("--shapes or --from-suite is needed")
        path = suite_files([args.shapes])[0]
        shapes, file_batch = read_shapes_file(path, "all")
        rows = parse_rows(args, shapes)
        return [(path, args.batch or file_batch or 64,
                 [(s, d, config) for config in configs for s, d in rows])]
    wanted = set(args.files.split(",")) if args.files else None
    jobs = []
    for suite in args.from_suite.split(","):
        for result in read_suite_json(suite, "--from-suite"):
            name = result["file"][:-len(".txt")] if result["file"].endswith(".txt") else \
                result["file"]
            above = rows_above_one(result)
            if not above or (wanted is not None and name not in wanted):
                continue
            path = suite_files([name])[0]
            by_name = {s["name"]: s for s in read_shapes_file(path, "all")[0]}
            missing = [layer for layer, *_ in above if layer not in by_name]
            if missing:
                raise ShapesError(f"--from-suite: {result['file']} no longer has the layers "
                                  f"{', '.join(missing)} of {suite}")
            jobs.append((path, args.batch or result["batch"],
                         [(by_name[layer], d, config) for layer, d, config, *_ in above]))
    return jobs


CONFIGS = ("f16_nhwc", "f32_nchw", "bf16_nhwc", "f16_nchw", "f32_nhwc", "bf16_nchw")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="", help="a shapes file (name or path)")
    parser.add_argument("--rows", default="", help="LAYER:DIRECTION pairs, with commas")
    parser.add_argument("--layers", default="", help="layers (commas); every one by default")
    parser.add_argument("--directions", default=",".join(DIRECTIONS))
    parser.add_argument("--configs", default="f16_nhwc")
    parser.add_argument("--from-suite", default="",
                        help="compare_gpu.py --suite --json files (commas): their rows above 1.00")
    parser.add_argument("--files", default="", help="with --from-suite: only these shapes files")
    parser.add_argument("--batch", type=int, default=0, help="the file's batch=N by default")
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--loop", type=int, default=50)
    parser.add_argument("--kernels", action="store_true",
                        help="each side's GPU kernels per call (torch.profiler)")
    parser.add_argument("--json", default="", help="write the rows here")
    args = parser.parse_args(argv)
    if args.turns < 1 or args.loop < 1:
        parser.error("--turns and --loop must be >= 1")
    try:
        jobs = plan(args)
    except ShapesError as error:
        parser.error(str(error))
    if not jobs:
        print("no rows to time")
        return 0

    import torch

    import dnnx

    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    cycles_per_ms = sleep_cycles_per_ms(torch.cuda)
    print(f"{args.turns} turns of {args.loop} calls, PyTorch {torch.__version__} (cuDNN "
          f"{torch.backends.cudnn.version()}), {torch.cuda.get_device_name(0)}")
    files = []
    for path, batch, rows in jobs:
        results = []
        for s, direction, config in rows:
            try:
                results.append(time_row(torch, dnnx, s, direction, config, batch, args,
                                        cycles_per_ms))
            except (dnnx.Error, RuntimeError) as error:  # the row says so; the others run
                results.append(dict(layer=s["name"], direction=direction, config=config,
                                    batch=batch, desc=describe(s, batch),
                                    error=f"{type(error).__name__}: {error}"))
            print(json.dumps({k: v for k, v in results[-1].items() if "kernels" not in k}),
                  file=sys.stderr, flush=True)
        print(f"\n## {os.path.basename(path)}, batch {batch}\n")
        print_rows(results, args.kernels)
        files.append(dict(file=os.path.basename(path), batch=batch, rows=results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(turns=args.turns, loop=args.loop, torch=torch.__version__,
                           gpu=torch.cuda.get_device_name(0), files=files), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
