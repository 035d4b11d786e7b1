#!/usr/bin/env python3
"""dnnx's cudnn backend vs PyTorch (cudnn.benchmark=True) on shapes files (ResNet-50 by default).

Runs build/bench/cudnn_conv_bench (exhaustive selection per layer and direction), then PyTorch on
the same cases in the same run, timed the same way (Note [gpu timing method] in
cudnn_conv_bench.cpp), and prints a Markdown table per config with the totals, the tuning cost next
to PyTorch's first-call cost, and the host overhead per call. TF32 is off on both sides.

  python3 bench/compare_gpu.py --bench build/bench/cudnn_conv_bench [--batch 64]
      [--configs f16_nhwc,f32_nchw] [--json results.json] [--dnnx-results bench_output.jsonl]

The shape suite (bench/shapes/*.txt: 1-, 2- and 3-D layers, groups, dilation; Note [shapes file
lines] in bench/shapes/shapes_file.hpp) runs one file after the other, every layer of each
(--tag all), at each file's own training batch (its batch=N line) unless --batch is given:

  python3 bench/compare_gpu.py --suite [--files mobilenetv2,deeplabv3] [--tag dw]
      [--max-layers 4] [--budget-s 300] [--rounds 3] [--dry-run]

Per layer and direction it reports dnnx's and PyTorch's ms, their ratio, dnnx's chosen candidate
and dnnx's search time (listing + plan builds + timing, seconds); per file and config the totals,
the worst row and the median and worst search time. --dry-run lists the layers and their descs
without a GPU, PyTorch or the benchmark binary.

Several GPUs (Note [suite shards]): one process per GPU, each with its share of the files
(--files) and CUDA_VISIBLE_DEVICES, each writing --json; then --merge prints the one suite
summary of all their files and writes their results together (scripts/gpu_run.sh's shapes part
does this with SHAPES_DEVICES):

  python3 bench/compare_gpu.py --merge shard0.json,shard1.json [--json suite.json]
      [--interleaved rows.json,archive.tar.gz]

(--interleaved: bench/interleaved_rows.py's timings of the rows above 1.00 with PyTorch in the
same process, Note [rows above 1.00 in one process].)

With --rounds N the benchmark (a fresh process each time, its searches included) and PyTorch's
timing take turns N times per file, and each row gives the medians over the rounds of either
side's kernel and per-call times and of dnnx's search time, with every choice dnnx made (Note
[suite rounds]). With --reuse-choices the first round's choices are kept in a file and the later
rounds run them as a later process of the same program would: the rows then also give what such
a process's first call costs beyond the kernel, next to the first round's search. With
--against-itself each round also runs the benchmark once more on those choices, and the rows of
one choice are compared with themselves as with PyTorch: how many rows above 1.00 a tie makes
(Note [the suite against itself]).
"""

import argparse
import contextlib
import gzip
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DIRECTIONS = ("fwd", "bwd_data", "bwd_weights")


class ShapesError(ValueError):
    """A malformed shapes file: the message names the file and the line."""


def _int_list(text, minimum, rank, where, what):
    """A stride/pad/dilation field: one integer for every dim or one per dim."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise ShapesError(f"{where}: {what} '{text}' must be an integer or a comma-separated list")
    if any(v < minimum for v in values):
        raise ShapesError(f"{where}: {what} '{text}' must be >= {minimum}")
    if len(values) == 1:
        return values * rank
    if len(values) != rank:
        raise ShapesError(f"{where}: {what} '{text}' needs 1 or {rank} entries")
    return values


def read_shapes_file(path, tag):
    """(layers, default batch or None) of a shapes file (Note [shapes file lines]); `tag` "all"
    or "" keeps every layer. Raises ShapesError naming the line for every malformed field."""
    shapes, batch = [], None
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            fields = raw.split("#", 1)[0].split()
            if not fields:
                continue
            where = f"{path}:{number}"
            if len(fields) == 1 and "=" in fields[0]:
                key, _, value = fields[0].partition("=")
                if key != "batch" or not value.isdigit() or int(value) < 1:
                    raise ShapesError(f"{where}: bad directive '{fields[0]}' (known: batch=N)")
                batch = int(value)
                continue
            if len(fields) < 6:
                raise ShapesError(f"{where}: expected 'name src weights stride pad count "
                                  f"[options] [tags]', got {len(fields)} fields")
            name, src, weights, stride, pad, count, *rest = fields
            try:
                src = [int(v) for v in src.split("x")]
                weights = [int(v) for v in weights.split("x")]
                count = int(count)
            except ValueError:
                raise ShapesError(f"{where}: src '{fields[1]}', weights '{fields[2]}' or count "
                                  f"'{fields[5]}' is not made of integers")
            if not 2 <= len(src) <= 4 or len(weights) != len(src) + 1 or min(src + weights) < 1:
                raise ShapesError(f"{where}: src '{fields[1]}' must be C x 1-3 spatial sizes and "
                                  f"weights '{fields[2]}' O x C/groups x as many kernel sizes")
            rank = len(src) - 1
            groups = src[0] // weights[1] if src[0] % weights[1] == 0 else 0
            if groups == 0 or weights[0] % groups != 0:
                raise ShapesError(f"{where}: weights' C/groups {weights[1]} must divide C "
                                  f"{src[0]} and the groups must divide O {weights[0]}")
            dilation, tags = [1] * rank, []
            for field in rest:
                if "=" not in field:
                    tags.append(field)
                    continue
                key, _, value = field.partition("=")
                if key == "groups":
                    if not value.isdigit() or int(value) != groups:
                        raise ShapesError(f"{where}: groups={value} disagrees with C / "
                                          f"weights' C/groups = {groups}")
                elif key == "dilation":
                    dilation = _int_list(value, 1, rank, where, "dilation")
                else:
                    raise ShapesError(f"{where}: unknown option '{field}' (known: groups=N, "
                                      f"dilation=D)")
            layer = dict(name=name, c=src[0], spatial=src[1:], o=weights[0], cg=weights[1],
                         kernel=weights[2:], stride=_int_list(stride, 1, rank, where, "stride"),
                         pad=_int_list(pad, 0, rank, where, "pad"), dilation=dilation,
                         groups=groups, count=count, tags=tags)
            out = output_size(layer)
            if min(out) < 1:
                raise ShapesError(f"{where}: the kernel does not fit the padded input")
            if not tag or tag == "all" or tag in tags:
                shapes.append(layer)
    return shapes, batch


def read_shapes(path, tag):
    return read_shapes_file(path, tag)[0]


def output_size(s):
    return [(i + 2 * p - d * (k - 1) - 1) // st + 1 for i, p, d, k, st in
            zip(s["spatial"], s["pad"], s["dilation"], s["kernel"], s["stride"])]


def describe(s, batch):
    dims = "x".join(str(v) for v in [batch, s["c"]] + s["spatial"])
    w = "x".join(str(v) for v in [s["o"], s["cg"]] + s["kernel"])
    join = lambda v: ",".join(str(x) for x in v)  # noqa: E731
    return (f"{dims} * {w} s{join(s['stride'])} p{join(s['pad'])} d{join(s['dilation'])} "
            f"g{s['groups']}")


def suite_files(names):
    """Paths of the suite's files: every bench/shapes/*.txt but resnet50 (run by default), or the
    named ones (a name or a path)."""
    folder = os.path.join(HERE, "shapes")
    if not names:
        return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                      if f.endswith(".txt") and f != "resnet50.txt")
    paths = []
    for name in names:
        path = name if os.path.sep in name or name.endswith(".txt") else os.path.join(
            folder, name + ".txt")
        if not os.path.isfile(path):
            raise ShapesError(f"--files: no shapes file '{name}' ({path})")
        paths.append(path)
    return paths


def run_dnnx(args, results_file=None, shapes_path=None, tag=None, budget_s=None,
             choices_file=None, reuse=False):
    if results_file:
        with open(results_file) as f:
            return [json.loads(line) for line in f if line.startswith("{")]
    cmd = [args.bench, "--shapes", shapes_path or args.shapes, "--tag", tag or args.tag,
           "--configs", ",".join(args.configs), "--loop", str(args.loop),
           "--calls", str(args.calls)]
    if args.batch:
        cmd += ["--batch", str(args.batch)]
    if args.max_layers:
        cmd += ["--max-layers", str(args.max_layers)]
    if budget_s:
        cmd += ["--budget-s", f"{budget_s:.1f}"]
    if choices_file:
        # A later round repeats the choice whose speedup over the heuristic pick the first
        # round measured.
        cmd += ["--choices-file", choices_file] + (["--reuse", "--no-heuristic"] if reuse else [])
    print("$", " ".join(cmd), flush=True)
    start = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    records = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    sys.stderr.write(out.stderr)
    print(f"dnnx bench: {len(records)} records in {time.time() - start:.1f} s", flush=True)
    return records


# Note [gated PyTorch loops]
# dnnx's loops are timed behind a gate (Note [gated timing] in src/backends/cudnn/backend.cpp): the
# GPU starts the clock only once the whole loop is queued, so the figure is the GPU's time alone.
# PyTorch's host takes tens of microseconds to queue one convolution (its dispatcher, cuDNN's
# frontend), longer than the kernels of many small layers, so an ungated loop of such a layer
# times PyTorch's host instead: rows of MobileNetV2's f16 file at 0.02-0.03 ms in one run measured
# 0.04-0.05 ms in another on the same machine (docs/benchmarks.md, the fp16 suite table). So
# PyTorch's loops are gated the same way: torch.cuda._sleep holds the stream while the host queues
# the start event, the loop and the stop event. The sleep is sized from the host's own time to
# queue the loop (measured on a warm-up loop) with a margin; the start event, queried once
# everything is queued, tells whether the sleep outlasted the queuing: if not, the sample is taken
# again with a sleep twice as long (three tries), and a sample still ungated says so (`gated`).
# Each row also keeps the host's time per call (`host_ms`) and one ungated loop's time per call
# (`ungated_ms`: what a caller's loop of the layer gets, PyTorch's host included), as the
# figures before this change were.
def sleep_cycles_per_ms(cuda):
    """Cycles of cuda._sleep per millisecond on this GPU now (its clock), measured once; None
    where this PyTorch has no cuda._sleep (its loops are then timed ungated, and say so)."""
    if not hasattr(cuda, "_sleep"):
        return None
    start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    cycles = 20_000_000
    cuda._sleep(cycles // 20)  # a first launch loads the kernel
    start.record()
    cuda._sleep(cycles)
    stop.record()
    stop.synchronize()
    return cycles / max(start.elapsed_time(stop), 1e-3)


def gated_loop_ms(cuda, fn, loop, host_ms, cycles_per_ms, tries=3):
    """(ms per call, gated) of `loop` calls of fn behind a sleep of the stream (Note [gated PyTorch
    loops]); `host_ms` is the host's time to queue such a loop."""
    sleep_ms = 1.5 * host_ms + 0.2
    for attempt in range(tries):
        start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        if cycles_per_ms is None:  # no sleep to hold the stream with
            start.record()
            for _ in range(loop):
                fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop) / loop, False
        cuda._sleep(int(sleep_ms * cycles_per_ms))
        start.record()
        for _ in range(loop):
            fn()
        stop.record()
        gated = not start.query()  # the GPU had not reached the start event yet
        stop.synchronize()
        if gated or attempt == tries - 1:
            return start.elapsed_time(stop) / loop, gated
        sleep_ms *= 2
    raise AssertionError("unreachable")


def first_call_ms(cuda, fn):
    """Wall ms of fn's first call, to the end of its GPU work."""
    cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def queued_loop_ms(cuda, fn, loop):
    """(host ms to queue `loop` calls of fn, ms per call of that loop as called, ungated: what an
    eager caller's loop gets), after three warm-up calls (Note [gated PyTorch loops])."""
    for _ in range(3):
        fn()
    cuda.synchronize()
    start, stop = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(loop):
        fn()
    host_ms = (time.perf_counter() - t0) * 1e3
    stop.record()
    stop.synchronize()
    return host_ms, start.elapsed_time(stop) / loop


# Note [PyTorch's kernels]
# Where PyTorch's row is faster than every candidate dnnx timed, which kernel it runs says why: a
# cuDNN kernel's name gives its family, tile and the types it reads, accumulates and writes in, so
# it can be looked for among dnnx's candidates or found to be one dnnx rules out (an engine that
# accumulates in f16, say, which PyTorch's cudnn.benchmark does not drop). With --torch-kernels
# each row runs a few more calls under torch.profiler after its timing (not timed themselves), and
# keeps the kernels they launched: name, launches per call, and the mean device time per call.
def kernel_summary(events, calls):
    """[{name, launches, us}] per call of the GPU kernels (and memsets) among profiler `events`
    (torch.profiler's FunctionEvents of `calls` calls), the longest first."""
    by_name = {}
    for event in events:
        if not str(getattr(event, "device_type", "")).endswith("CUDA"):
            continue
        launches, us = by_name.get(event.name, (0, 0.0))
        by_name[event.name] = (launches + 1, us + event.time_range.elapsed_us())
    rows = [dict(name=name, launches=launches / calls, us=us / calls)
            for name, (launches, us) in by_name.items()]
    return sorted(rows, key=lambda row: -row["us"])


def torch_kernels(torch, fn, calls=5):
    """kernel_summary of `calls` calls of fn, run under torch.profiler (Note [PyTorch's
    kernels])."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return kernel_summary(prof.events(), calls)


def torch_operands(torch, s, batch, dtype, config, device="cuda"):
    """PyTorch's (x, w, dy) of shape line `s` at `batch` on `device`, uniform in [-1, 1], in
    `config`'s layout (channels-last for *_nhwc in 2-D and 3-D; 1-D tensors have one layout)."""
    dev = torch.device(device)
    rank = len(s["spatial"])
    fmt = torch.contiguous_format
    if config.endswith("nhwc") and rank == 2:
        fmt = torch.channels_last
    elif config.endswith("nhwc") and rank == 3:
        fmt = torch.channels_last_3d

    def uniform(*dims):
        t = torch.empty(*dims, device=dev, dtype=dtype)
        t.uniform_(-1, 1)
        return t.contiguous(memory_format=fmt)

    # dy's shape from arithmetic: running the forward here would let its search happen before
    # its first call is timed.
    return (uniform(batch, s["c"], *s["spatial"]), uniform(s["o"], s["cg"], *s["kernel"]),
            uniform(batch, s["o"], *output_size(s)))


def torch_call(torch, s, direction, x, w, dy):
    """A call of PyTorch's convolution of shape line `s` in `direction` on (x, w, dy): the aten
    ops that nn.Conv*d's forward and autograd run."""
    rank = len(s["spatial"])
    stride, pad, dilation, groups = s["stride"], s["pad"], s["dilation"], s["groups"]
    if direction == "fwd":
        return lambda: torch.ops.aten.convolution(x, w, None, stride, pad, dilation, False,
                                                  [0] * rank, groups)
    mask = [direction == "bwd_data", direction == "bwd_weights", False]
    return lambda: torch.ops.aten.convolution_backward(dy, x, w, None, stride, pad, dilation, False,
                                                       [0] * rank, groups, mask)


def run_torch(args, shapes, batch, wanted=None, kernels=None):
    """PyTorch on `shapes` at `batch`, timed like the C++ bench; `wanted` (a set of
    layer/direction/config keys) limits it to the cases dnnx ran; `kernels` (by default
    --torch-kernels) keeps each row's kernels (Note [PyTorch's kernels])."""
    if kernels is None:
        kernels = getattr(args, "torch_kernels", False)
    import torch

    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    results = {}
    info = dict(torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                gpu=torch.cuda.get_device_name(0))
    cycles_per_ms = sleep_cycles_per_ms(torch.cuda)
    info["gated"] = cycles_per_ms is not None  # Note [gated PyTorch loops]
    for config in args.configs:
        dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[
            config.split("_")[0]]
        for s in shapes:
            keys = [f"{s['name']}/{d}/{config}" for d in DIRECTIONS]
            if wanted is not None and not any(k in wanted for k in keys):
                continue
            x, w, dy = torch_operands(torch, s, batch, dtype, config)
            for direction in DIRECTIONS:
                if wanted is not None and f"{s['name']}/{direction}/{config}" not in wanted:
                    continue
                fn = torch_call(torch, s, direction, x, w, dy)
                # The first call of a new shape runs cudnn.benchmark's search.
                first_ms = first_call_ms(torch.cuda, fn)
                host_ms, ungated_ms = queued_loop_ms(torch.cuda, fn, args.loop)
                samples, gated = [], True
                for _ in range(3):
                    ms, held = gated_loop_ms(torch.cuda, fn, args.loop, host_ms, cycles_per_ms)
                    samples.append(ms)
                    gated = gated and held
                calls = []
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    fn()
                    torch.cuda.synchronize()
                    calls.append((time.perf_counter() - t0) * 1e3)
                results[f"{s['name']}/{direction}/{config}"] = dict(
                    kernel_ms=statistics.median(samples), call_ms=statistics.median(calls),
                    first_call_ms=first_ms, gated=gated, host_ms=host_ms / args.loop,
                    ungated_ms=ungated_ms)
                if kernels:
                    results[f"{s['name']}/{direction}/{config}"]["kernels"] = torch_kernels(
                        torch, fn)
            del x, w, dy
    # Host overhead of a tiny conv, as the C++ bench measures it.
    x = torch.randn(1, 8, 8, 8, device=dev)
    w = torch.randn(8, 8, 3, 3, device=dev)
    for _ in range(200):
        torch.nn.functional.conv2d(x, w, None, 1, 1)
    torch.cuda.synchronize()
    per_call = []
    for _ in range(30):
        t0 = time.perf_counter()
        for _ in range(100):
            torch.nn.functional.conv2d(x, w, None, 1, 1)
        per_call.append((time.perf_counter() - t0) * 1e6 / 100)
        torch.cuda.synchronize()
    info["host_us_per_call_fwd"] = statistics.median(per_call)
    return results, info


# Note [suite rounds]
# Rows of a few percent either way move between runs by as much: the GPU's clock under its power
# limit, and dnnx's search keeping one of several near-equal candidates. A target like "no row
# above 1.00" is therefore judged on the median of several runs, each side's runs taking turns so
# that both see the same conditions over the rounds. A case missing from a round (a budget that
# ran out) takes the median of the rounds it ran in; PyTorch's first-call time is its first
# round's (later rounds find its cudnn.benchmark cache filled).
#
# With --reuse-choices the first round searches and keeps its choices in a file, and the later
# rounds are later processes of the same program (Note [choices across processes] in
# cudnn_conv_bench.cpp): they run the first round's choices, so the rows' medians are the timing
# of one choice per row, as a program that keeps its choices gets, not of several searches. The
# search time is then the first round's, and each row also gives what a later process's first
# call cost beyond the kernel: reading the choice, re-validating it, loading or building its
# plan. The second process (the second round) also settles the choice's late plans (Note [late
# plans] in src/ops/dispatch.cpp): it loads and times the plans the search skipped while they
# compiled, within its share of the search (TuneOptions::late_plan_share, since e147e7b), and
# writes the choice back without those it timed; the processes after it settle the rest the same
# way. Its cost is therefore given apart (`reuse_ms`, the figure the search target's "a second
# process" names) from the median of the rounds after it (`reuse_after_ms`); a median over both
# would hide the settling, as the suite's figures did up to commit 8300667. Where the benchmark
# records the late plans still listed after each round's first call (`late_plans`), a row also
# gives how many the second process settled (`late_settled`) and how many the last round left
# (`late_left`). The first round ends as a program's next step would (Note [the program's next
# step] in cudnn_conv_bench.cpp): it selects every case once more, settling the late plans whose
# compiles have finished, and records that per case (`next_step` records); a row then gives that
# selection's wall time (`next_step_ms`), its choice (`next_step_algo`) and the late plans it left
# listed (`next_step_late`), from which the second process's `late_settled` counts; a step that
# failed gives `next_step_error` instead. The later rounds leave out the heuristic pick (whose
# listing and timing took about as long as the rest of such a round): the speedup over it is the
# first round's.
def combine_rounds(dnnx_rounds, torch_rounds, reuse=False):
    """(records, torch results) combining per-round bench records and PyTorch results: every
    non-case record of the first round, and per case the first round's record with the medians of
    kernel_ms, call_ms and search_s over the rounds, `algos` (the distinct choices, in round
    order) and `rounds` (each round's own figures, its first call's among them where recorded).
    With `reuse` (the rounds after the first reused its choices, without timing the heuristic
    pick again), search_s is the first round's,
    `reuse_ms` the second round's first call less the kernel, `reuse_after_ms` the median of
    that over the rounds after it (with three rounds or more), and `reuse_from_file` whether the
    file answered in every later round. The heuristic pick's time is the median of the rounds
    that timed it."""
    if len(dnnx_rounds) == 1:
        return dnnx_rounds[0], torch_rounds[0]
    cases = {}
    for records in dnnx_rounds:
        for r in records:
            if r["kind"] == "case":
                cases.setdefault(r["case"], []).append(r)
    combined = [r for r in dnnx_rounds[0] if r["kind"] != "case"]
    next_steps = {r["case"]: r for r in dnnx_rounds[0] if r["kind"] == "next_step"}
    for key, runs in cases.items():
        r = dict(runs[0])
        first_late = runs[0].get("late_plans")
        if key in next_steps and "error" in next_steps[key]:
            r["next_step_error"] = next_steps[key]["error"]  # the search's choice stood
        elif key in next_steps:
            step = next_steps[key]
            r.update(next_step_ms=step["ms"], next_step_algo=step["algo"],
                     next_step_late=step["late_plans"])
            first_late = step["late_plans"]
        r["kernel_ms"] = statistics.median(one["kernel_ms"] for one in runs)
        r["call_ms"] = statistics.median(one["call_ms"] for one in runs)
        r["search_s"] = statistics.median(search_s(one) for one in runs)
        if reuse:
            r["search_s"] = search_s(runs[0])
            later = runs[1:]
            if later:
                costs = [max(0.0, one["first_call_ms"] - one["kernel_ms"]) for one in later]
                r["reuse_ms"] = costs[0]
                if len(costs) > 1:
                    r["reuse_after_ms"] = statistics.median(costs[1:])
                r["reuse_from_file"] = all(one.get("from_file", False) for one in later)
                if all("late_plans" in one for one in runs):
                    r["late_settled"] = max(0, first_late - later[0]["late_plans"])
                    r["late_left"] = runs[-1]["late_plans"]
        heuristic = [one["heuristic_kernel_ms"] for one in runs if "heuristic_kernel_ms" in one]
        if heuristic:
            r["heuristic_kernel_ms"] = statistics.median(heuristic)
        r["algos"] = list(dict.fromkeys(one["algo"] for one in runs))
        r["rounds"] = [dict(kernel_ms=one["kernel_ms"], algo=one["algo"], search_s=search_s(one),
                            **({"first_call_ms": one["first_call_ms"]}
                               if "first_call_ms" in one else {}),
                            **({"late_plans": one["late_plans"]} if "late_plans" in one else {}))
                       for one in runs]
        combined.append(r)
    torch_combined = {}
    for key in dict.fromkeys(k for results in torch_rounds for k in results):
        runs = [results[key] for results in torch_rounds if key in results]
        torch_combined[key] = dict(
            kernel_ms=statistics.median(one["kernel_ms"] for one in runs),
            call_ms=statistics.median(one["call_ms"] for one in runs),
            first_call_ms=runs[0]["first_call_ms"],
            rounds=[one["kernel_ms"] for one in runs])
        if all("gated" in one for one in runs):  # Note [gated PyTorch loops]
            torch_combined[key]["gated"] = all(one["gated"] for one in runs)
            for field in ("host_ms", "ungated_ms"):
                if all(field in one for one in runs):
                    torch_combined[key][field] = statistics.median(one[field] for one in runs)
        if "kernels" in runs[0]:  # Note [PyTorch's kernels]: the first round's
            torch_combined[key]["kernels"] = runs[0]["kernels"]
    return combined, torch_combined


# Note [loop against search]
# The search ranks its contenders on the final round's samples, loops of about 0.5 ms (two runs of
# a 0.4 ms kernel: Note [final round] in src/tune/select.cpp), while the benchmark's loop, like a
# network's stream of calls, queues 50. A choice whose loop reads well above what its own search
# read of it was misjudged by those short samples: on an H200 cuDNN's texture-reading variants of
# ResNeXt-50's grouped 3x3 layers in fp32 led by up to 4% in the search and trailed by 4-5% in
# loops of 50 (docs/benchmarks.md, "Texture-reading engines in long loops"). So each row's median
# loop time over the rounds is set against the first round's search reading of the same choice
# (its row in `search_rows`), and the rows over LOOP_OVER_SEARCH are named: where the search's
# way of timing and the program's part. Rows whose choice changed between rounds, or whose
# search kept no row for it, are left out.
LOOP_OVER_SEARCH = 1.03


def loop_against_search(d):
    """(the row's loop time over its search's reading of the same choice, that reading in ms),
    or None (Note [loop against search])."""
    if len(d.get("algos", [d["algo"]])) > 1:
        return None
    for row in d.get("search_rows", []):
        if row.get("id") == d["algo"] and row.get("status", "ok") == "ok" and \
                (row.get("median_ms") or 0) > 0:
            return d["kernel_ms"] / row["median_ms"], row["median_ms"]
    return None


# Note [rows above 1.00 and the rounds' spread]
# Where both sides run the same cuDNN or cuBLASLt kernel, a row's ratio is decided by how that
# kernel ran in each process: on an H200 one candidate's loop moved 5-15% between processes of
# the same build (ResNeXt-50's l4.reduce.first bwd_weights on cuDNN's engine 62, 0.036-0.048 ms;
# docs/benchmarks.md, "GPU convolution beyond ResNet-50"), more than the 1-5% by which most rows
# above 1.00 lose. So each row above 1.00 (as printed, two decimals) is set against the spread of
# each side over its rounds, max / min of its kernel times (dnnx's rounds run one choice in
# separate processes with --reuse-choices; PyTorch's are its separate processes): a row whose
# ratio is within the larger of the two spreads is a loss no larger than one side's own
# process-to-process variation, one beyond both a loss the rounds do not explain. A row timed in
# one round only has no spread and counts as beyond. The target (no row above 1.00) is still
# judged on the medians; this says which rows of it are worth a look.
def rounds_spread(d, t):
    """(dnnx's, PyTorch's) max / min of a row's kernel times over the rounds, None for a side
    timed in fewer than two (Note [rows above 1.00 and the rounds' spread])."""
    def spread(times):
        times = [x for x in times if x and x > 0]
        return max(times) / min(times) if len(times) >= 2 else None
    return (spread([one.get("kernel_ms") for one in d.get("rounds", [])]),
            spread(t.get("rounds", [])))


def above_one(ratio, spreads):
    """Whether a row's ratio prints above 1.00, and whether it is beyond both sides' spreads."""
    if round(ratio, 2) <= 1.0:
        return False, False
    known = [x for x in spreads if x is not None]
    return True, len(known) < 2 or ratio > max(known)


def search_s(record):
    """dnnx's search time for a case: listing + plan builds + timing (seconds)."""
    if "search_s" in record:
        return record["search_s"]
    return record["first_call_ms"] / 1e3  # older bench output: the whole first call


def speedup(record):
    """The heuristic pick's kernel time over the choice's, printed ('-' when not timed)."""
    if "heuristic_kernel_ms" not in record:
        return "-"
    return f"{record['heuristic_kernel_ms'] / record['kernel_ms']:.2f}"


# The kinds of candidate a choice can be, by the prefix of its id (the most specific first).
CHOICE_KINDS = (("cudnn:gemm:packed:", "gemm packed"), ("cudnn:gemm:", "gemm"),
                ("cudnn:im2col:packed:", "im2col packed"), ("cudnn:im2col:", "im2col"),
                ("cudnn:winograd:", "winograd"),
                ("cudnn:taps:", "taps"), ("cudnn:frames:", "frames"),
                ("cudnn:fold:planes:", "fold planes"), ("cudnn:fold:frames:", "fold frames"),
                ("cudnn:fold:stacked:", "fold stacked"),
                ("cudnn:kernel:depthwise:", "depthwise"), ("cudnn:kernel:narrow:", "narrow"),
                ("cudnn:padc:", "padded"),
                ("cudnn:legacy:", "legacy"), ("cudnn:engine:", "engine"))


def choice_kind(algo):
    """The kind of candidate `algo` (an id) is: 'engine', 'gemm', ...; else its first field."""
    for prefix, kind in CHOICE_KINDS:
        if algo.startswith(prefix):
            return kind
    return algo.split(":")[0]


def choices(record):
    """dnnx's choice for a row: every distinct one over the rounds."""
    return " / ".join(f"`{algo}`" for algo in record.get("algos", [record["algo"]]))


def print_tables(args, shapes, records, torch_results, batch):
    """The per-config tables; returns a summary per config."""
    cases = {r["case"]: r for r in records if r["kind"] == "case"}
    summaries = {}
    for config in args.configs:
        print(f"### {config} (kernel-bound ms per call; per-call ms = synchronous wall time)\n")
        print("| layer | dir | dnnx kernel | torch kernel | dnnx/torch | dnnx call "
              "| torch call | dnnx search s | torch 1st call s | dnnx choice | speedup vs heuristic |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        tot_d = tot_t = tot_dc = tot_tc = tot_tune = tot_first = 0.0
        worst, worst_row, searches, reuses, kinds = 0.0, "", [], [], {}
        skipping, changed = 0, 0
        next_steps = []  # (ms, late plans it settled, whether it changed the choice)
        with_next = []  # per row with a next step: its search and that step, s
        failed_steps = []  # rows whose next step failed: (row, why)
        ungated = []  # PyTorch rows whose loops the sleep did not hold (Note [gated PyTorch loops])
        as_called = []  # PyTorch's ungated loop per row, where recorded
        close = []  # rows at 0.98 or above with PyTorch's kernels (Note [PyTorch's kernels])
        above = []  # (row, ratio, spreads, beyond): Note [rows above 1.00 and the rounds' spread]
        against = []  # (loop / search, row, search ms, loop ms, choice): Note [loop against search]
        for s in shapes:
            for direction in DIRECTIONS:
                key = f"{s['name']}/{direction}/{config}"
                d, t = cases.get(key), torch_results.get(key)
                if d is None or t is None:
                    print(f"| {s['name']} | {direction} | missing | | | | | | | | |")
                    continue
                ratio = d["kernel_ms"] / t["kernel_ms"]
                if ratio > worst:
                    worst, worst_row = ratio, f"{s['name']} {direction}"
                search = search_s(d)
                searches.append((search, f"{s['name']} {direction}", d))
                if "reuse_ms" in d:
                    reuses.append((d["reuse_ms"], d.get("reuse_after_ms"), search,
                                   d["reuse_from_file"], f"{s['name']} {direction}",
                                   d.get("late_settled", d.get("plans_skipped", 0)),
                                   d.get("late_left")))
                kind = choice_kind(d["algo"])
                kinds[kind] = kinds.get(kind, 0) + 1
                # Note [late plans]: a search that skipped plans keeps them as late plans, which
                # a later round's process may time and choose.
                skipping += d.get("plans_skipped", 0) > 0
                changed += len(d.get("algos", [d["algo"]])) > 1
                if t.get("gated") is False:
                    ungated.append(f"{s['name']} {direction}")
                if "ungated_ms" in t:
                    as_called.append(t["ungated_ms"])
                if (read := loop_against_search(d)) is not None:
                    against.append((read[0], f"{s['name']} {direction}", read[1],
                                    d["kernel_ms"], d["algo"]))
                spreads = rounds_spread(d, t)
                is_above, beyond = above_one(ratio, spreads)
                if is_above:
                    above.append((f"{s['name']} {direction}", ratio, spreads, beyond))
                if "kernels" in t and ratio >= 0.98:
                    close.append((f"{s['name']} {direction}", ratio, t["kernels"]))
                if "next_step_error" in d:
                    failed_steps.append((f"{s['name']} {direction}", d["next_step_error"]))
                if "next_step_ms" in d:
                    with_next.append(search + d["next_step_ms"] / 1e3)
                    next_steps.append((d["next_step_ms"],
                                       max(0, d.get("late_plans", 0) - d["next_step_late"]),
                                       d["next_step_algo"] != d["algo"]))
                tot_d += d["kernel_ms"]
                tot_t += t["kernel_ms"]
                tot_dc += d["call_ms"]
                tot_tc += t["call_ms"]
                tot_tune += search
                tot_first += t["first_call_ms"] / 1e3
                print(f"| {s['name']} | {direction} | {d['kernel_ms']:.3f} "
                      f"| {t['kernel_ms']:.3f} | {ratio:.2f} | {d['call_ms']:.3f} "
                      f"| {t['call_ms']:.3f} "
                      f"| {search:.2f} | {t['first_call_ms'] / 1e3:.2f} "
                      f"| {choices(d)} | {speedup(d)} |")
        if tot_t > 0:
            print(f"| **total** | | **{tot_d:.3f}** | **{tot_t:.3f}** "
                  f"| **{tot_d / tot_t:.2f}** | {tot_dc:.3f} | {tot_tc:.3f} "
                  f"| {tot_tune:.1f} | {tot_first:.1f} | "
                  f"worst layer {worst:.2f} | |\n")
            slowest = max(searches, key=lambda entry: entry[0])
            median = statistics.median(v for v, _, _ in searches)
            print(f"worst row: {worst_row} ({worst:.2f}x PyTorch); search time per "
                  f"layer-direction: median {median:.2f} s, worst {slowest[0]:.2f} s "
                  f"({slowest[1]})\n")
            if parts := search_parts(slowest[2]):
                print(f"the worst search's time: {parts}\n")
            by_count = sorted(kinds.items(), key=lambda item: (-item[1], item[0]))
            print("choices by kind: " + ", ".join(f"{k} {n}" for k, n in by_count) + "\n")
            print(f"searches that skipped plans (kept as late plans): {skipping} of "
                  f"{len(searches)} rows; choices that changed between rounds: {changed}\n")
            def described(entry):
                row, ratio, spreads, _ = entry
                known = [f"{who} {x:.3f}" for who, x in zip(("dnnx", "torch"), spreads)
                         if x is not None]
                return f"{row} {ratio:.3f}" + (f" ({', '.join(known)})" if known else "")
            beyond_rows = [entry for entry in above if entry[3]]
            if above:
                print(f"rows above 1.00: {len(above)}, {len(beyond_rows)} of them beyond both "
                      f"sides' spread over the rounds (max / min; Note [rows above 1.00 and the "
                      f"rounds' spread])"
                      + (": " + "; ".join(described(e) for e in beyond_rows)
                         if beyond_rows else "")
                      + ("; within it: " + "; ".join(described(e) for e in above if not e[3])
                         if len(beyond_rows) < len(above) else "") + "\n")
            over = sorted((entry for entry in against if entry[0] > LOOP_OVER_SEARCH),
                          reverse=True)
            if against:
                print(f"the loop against the search's own reading of the choice (Note [loop "
                      f"against search]): median {statistics.median(e[0] for e in against):.3f} "
                      f"over {len(against)} rows; over {LOOP_OVER_SEARCH:.2f}: {len(over)}"
                      + (": " + "; ".join(f"{row} {ratio:.3f} (search {search:.4f} ms, loop "
                                          f"{loop:.4f} ms, `{algo}`)"
                                          for ratio, row, search, loop, algo in over[:8])
                         if over else "")
                      + (f"; {len(over) - 8} more" if len(over) > 8 else "") + "\n")
            summaries[config] = dict(dnnx_ms=tot_d, torch_ms=tot_t, ratio=tot_d / tot_t,
                                     rows_above=len(above),
                                     rows_above_beyond_spread=[e[0] for e in beyond_rows],
                                     worst_ratio=worst, worst_row=worst_row,
                                     search_total_s=tot_tune, search_median_s=median,
                                     search_worst_s=slowest[0], search_worst_row=slowest[1],
                                     rows=len(searches), batch=batch, choice_kinds=kinds,
                                     rows_skipping_plans=skipping, choices_changed=changed,
                                     loop_over_search=[e[1] for e in over])
            if next_steps:
                step_s = sum(ms for ms, _, _ in next_steps) / 1e3
                summaries[config].update(
                    next_step_total_s=step_s,
                    next_step_share=step_s / tot_tune if tot_tune > 0 else 0.0,
                    next_step_late_plans=sum(n for _, n, _ in next_steps),
                    next_step_switched=sum(1 for _, _, switched in next_steps if switched),
                    search_with_next_step_median_s=statistics.median(with_next),
                    search_with_next_step_worst_s=max(with_next))
                m = summaries[config]
                print(f"the first process's next step (every row selected again after the "
                      f"last search): {m['next_step_total_s']:.2f} s in all, "
                      f"{100 * m['next_step_share']:.1f}% of the search; late plans settled: "
                      f"{m['next_step_late_plans']}; choices it changed: "
                      f"{m['next_step_switched']}; a row's search and next step together: "
                      f"median {m['search_with_next_step_median_s']:.2f} s, worst "
                      f"{m['search_with_next_step_worst_s']:.2f} s\n")
            if as_called and len(as_called) == len(searches):
                called = sum(as_called)
                summaries[config].update(torch_ungated_ms=called, ratio_ungated=tot_d / called)
                print(f"PyTorch's loops as called, its host time per call not hidden (Note [gated "
                      f"PyTorch loops]): {called:.3f} ms in all, dnnx/that "
                      f"{tot_d / called:.2f}\n")
            if close:
                print("PyTorch's kernels on the rows at 0.98 or above (Note [PyTorch's kernels]; "
                      "per call: launches x name, device us):")
                for row, ratio, kernels in close:
                    print(f"- {row} ({ratio:.2f}): " + "; ".join(
                        f"{k['launches']:g} x `{k['name']}` {k['us']:.1f}" for k in kernels))
                print()
            if ungated:
                summaries[config]["torch_ungated_rows"] = len(ungated)
                print(f"PyTorch rows timed with host time in them (the sleep did not outlast the "
                      f"queuing: Note [gated PyTorch loops]): {', '.join(ungated)}\n")
            if failed_steps:
                summaries[config]["next_step_failed"] = len(failed_steps)
                print("the next step failed (the search's choice stood): "
                      + "; ".join(f"{row}: {why}" for row, why in failed_steps) + "\n")
            if reuses:
                summaries[config].update(reuse_summary(reuses))
                m = summaries[config]
                after = (f"; the processes after it: {m['reuse_after_total_s']:.2f} s in all, "
                         f"{100 * m['reuse_after_share']:.1f}%"
                         if "reuse_after_share" in m else "")
                per_plan = (f", {m['reuse_ms_per_late_plan']:.1f} ms each"
                            if "reuse_ms_per_late_plan" in m else "")
                print(f"second process (the first round's choices from its file, their late "
                      f"plans settled): first call beyond the kernel, median "
                      f"{m['reuse_median_ms']:.1f} ms, worst {m['reuse_worst_ms']:.1f} ms "
                      f"({m['reuse_worst_row']}); {m['reuse_total_s']:.2f} s in all, "
                      f"{100 * m['reuse_share']:.1f}% of the search's {tot_tune:.1f} s{after}; "
                      f"{m['reuse_answered']} of {len(reuses)} rows answered by the file in "
                      f"every later round; late plans settled: {m['reuse_late_plans']}"
                      f"{per_plan}"
                      + (f"; left listed after the last round: {m['reuse_late_left']}"
                         if "reuse_late_left" in m else "") + "\n")
    return summaries


def search_parts(record):
    """Where a row's search time went (SearchTimes), as the benchmark recorded it; empty for a
    record without the split (a choice read from a file, an older benchmark)."""
    if "search_full_runs" not in record or record.get("from_file"):
        return ""
    return (f"list {record['list_ms']:.0f} ms, plan builds {record['search_build_ms']:.0f} ms, "
            f"{record['search_full_runs']:.0f} full runs {record['search_full_run_ms']:.0f} ms, "
            f"{record['search_probes']:.0f} probes {record['search_probe_ms']:.0f} ms, "
            f"final round {record['search_final_ms']:.0f} ms; costliest: "
            f"{record['search_costliest'] or '-'}"
            + "".join(f"; {row['id']}: {row['status']}"
                      + (f" ({row['detail']})" if row.get('detail') else "")
                      for row in record.get("search_costliest_rows", [])))


def reuse_summary(reuses):
    """Figures of the later processes' first calls (Note [suite rounds]): `reuses` holds (the
    second process's ms, the median ms of those after it or None, search s, answered by the file,
    row, the late plans the second process settled (where unrecorded, those the first round's
    search kept), and optionally the late plans the last round left or None) per row. The shares
    are of the first round's search; those of the processes after the second only where every row
    has one. The second process's cost per late plan is its time on the rows where it settled some
    over their count: the share moves with how many the first round left, which its compiles'
    timing decides, and this tells the two apart."""
    slowest = max(reuses, key=lambda entry: entry[0])
    total_s = sum(entry[0] for entry in reuses) / 1e3
    search_total = sum(entry[2] for entry in reuses)
    summary = dict(reuse_median_ms=statistics.median(entry[0] for entry in reuses),
                   reuse_worst_ms=slowest[0], reuse_worst_row=slowest[4], reuse_total_s=total_s,
                   reuse_share=total_s / search_total if search_total > 0 else 0.0,
                   reuse_answered=sum(1 for entry in reuses if entry[3]),
                   reuse_late_plans=sum(entry[5] for entry in reuses))
    left = [entry[6] for entry in reuses if len(entry) > 6 and entry[6] is not None]
    if left:
        summary["reuse_late_left"] = sum(left)
    if summary["reuse_late_plans"] > 0:
        summary["reuse_ms_per_late_plan"] = (sum(entry[0] for entry in reuses if entry[5] > 0)
                                             / summary["reuse_late_plans"])
    if all(entry[1] is not None for entry in reuses):
        after_s = sum(entry[1] for entry in reuses) / 1e3
        summary.update(reuse_after_total_s=after_s,
                       reuse_after_share=after_s / search_total if search_total > 0 else 0.0)
    return summary


def print_overhead(records, torch_info):
    overhead = [r for r in records if r["kind"] == "overhead"]
    print("Host overhead per conv call (tiny 1x8x8x8 conv, batches of 100 calls, no sync):")
    for r in overhead:
        print(f"  dnnx {r['direction']}: {r['host_us_per_call']:.2f} us host through the op layer "
              f"({r['algo']}; its plan's execute() alone {r['plan_execute_us']:.2f} us; "
              f"{r['legacy_algo']} {r['legacy_host_us_per_call']:.2f} us; "
              f"GPU {r['gpu_us_per_call']:.2f} us/call)")
    print(f"  torch fwd: {torch_info['host_us_per_call_fwd']:.2f} us host")


def run_suite(args):
    """Every file of the suite, one after the other (see the module's docstring)."""
    paths = suite_files(args.files.split(",") if args.files else None)
    files = []
    for path in paths:
        shapes, file_batch = read_shapes_file(path, args.tag)
        if args.max_layers:
            shapes = shapes[:args.max_layers]
        files.append((path, shapes, args.batch or file_batch or 64))
    if args.dry_run:
        for path, shapes, batch in files:
            print(f"## {os.path.basename(path)}: {len(shapes)} layers at batch {batch}")
            for s in shapes:
                print(f"  {s['name']:28} {describe(s, batch)}  x{s['count']}")
        print(f"{sum(len(s) for _, s, _ in files)} layers, "
              f"{3 * len(args.configs) * sum(len(s) for _, s, _ in files)} layer-direction-configs")
        return
    start = time.time()
    results = []
    choices_dir = tempfile.mkdtemp(prefix="dnnx-choices-") if args.reuse_choices else None
    for path, shapes, batch in files:
        budget = None
        if args.budget_s:
            budget = args.budget_s - (time.time() - start)
            if budget <= 0:
                print(f"\n## {os.path.basename(path)}: skipped (budget of {args.budget_s} s spent)")
                continue
        dnnx_rounds, torch_rounds, itself_rounds = [], [], []
        choices_file = None
        if args.reuse_choices:
            choices_file = os.path.join(
                choices_dir, os.path.splitext(os.path.basename(path))[0] + ".json")
        for _ in range(args.rounds):
            if dnnx_rounds and budget:
                budget = args.budget_s - (time.time() - start)
                if budget <= 0:
                    break
            records = run_dnnx(args, shapes_path=path, tag=args.tag, budget_s=budget,
                               choices_file=choices_file, reuse=bool(dnnx_rounds))
            suite = next((r for r in records if r["kind"] == "suite"), {})
            batch = int(suite.get("batch", batch))
            ran = {r["case"] for r in records if r["kind"] == "case"}
            # The kernels of the first round only: the later rounds run the same plans.
            kernels = getattr(args, "torch_kernels", False) and not torch_rounds
            torch_results, torch_info = run_torch(args, shapes, batch, wanted=ran,
                                                  kernels=kernels)
            dnnx_rounds.append(records)
            torch_rounds.append(torch_results)
            if getattr(args, "against_itself", False):  # Note [the suite against itself]
                itself_rounds.append(run_dnnx(args, shapes_path=path, tag=args.tag,
                                              budget_s=budget, choices_file=choices_file,
                                              reuse=True))
            # Written after every round (its tables printed once, after the last): a run stopped
            # from outside, as by the device call's time limit, keeps the rounds it finished.
            if args.json:
                with contextlib.redirect_stdout(io.StringIO()):
                    partial = file_result(args, path, shapes, batch, dnnx_rounds, torch_rounds,
                                          torch_info, itself_rounds)
                write_results(args.json, results + [partial])
        results.append(file_result(args, path, shapes, batch, dnnx_rounds, torch_rounds,
                                   torch_info, itself_rounds))
    print_suite_summary(results)


def file_result(args, path, shapes, batch, dnnx_rounds, torch_rounds, torch_info,
                itself_rounds=()):
    """One file's entry of the suite's JSON from the rounds run so far; prints its tables (and,
    with `itself_rounds`, the comparison of Note [the suite against itself])."""
    records, torch_results = combine_rounds(dnnx_rounds, torch_rounds, reuse=args.reuse_choices)
    device = next((r for r in records if r["kind"] == "device"), {})
    print(f"\n## {os.path.basename(path)}: batch {batch}, {len(shapes)} layers, "
          f"{len(dnnx_rounds)} round(s)\n")
    print(f"GPU: {torch_info['gpu']}; dnnx: {device.get('fingerprint', '?')}; "
          f"PyTorch {torch_info['torch']} (cuDNN {torch_info['cudnn']}), "
          f"cudnn.benchmark=True, TF32 off\n")
    for r in records:
        if r["kind"] == "budget":
            print(f"budget: {int(r['skipped'])} layer-configs left out: {r['left_out']}\n")
    summaries = print_tables(args, shapes, records, torch_results, batch)
    result = dict(file=os.path.basename(path), batch=batch, rounds=len(dnnx_rounds), dnnx=records,
                  torch=torch_results, torch_info=torch_info, summary=summaries)
    if itself_rounds:
        result["itself"] = itself_rows(itself_rounds)
        add_against_itself(result)
    return result


# Note [the suite against itself]
# Rows where dnnx and PyTorch run the same kernel can only tie, and a tie's ratio is decided by
# how that kernel ran in each side's processes. --against-itself measures how many rows above
# 1.00 that alone makes: each round runs one more process of the benchmark, after PyTorch's turn,
# with the first round's choices from their file, and the rows are compared as the suite
# compares dnnx with PyTorch (the medians over the rounds, above 1.00 as printed, beyond both
# sides' spread or within it: Note [rows above 1.00 and the rounds' spread]), dnnx's rounds on
# one side and those extra processes on the other. Only rows that ran one choice in every
# process of both sides are compared: a later process can settle a late plan and change its row's
# choice (Note [suite rounds]), and such a row is counted apart. What the comparison then finds
# above 1.00 is a row of one kernel against itself: the suite's own floor for a tie.
def itself_rows(itself_rounds):
    """{case: {kernel_ms, rounds, algos}} of the extra processes' rounds (Note [the suite
    against itself]): per case the median kernel time, each round's, and the distinct choices."""
    runs = {}
    for records in itself_rounds:
        for r in records:
            if r["kind"] == "case":
                runs.setdefault(r["case"], []).append(r)
    return {key: dict(kernel_ms=statistics.median(one["kernel_ms"] for one in these),
                      rounds=[one["kernel_ms"] for one in these],
                      algos=list(dict.fromkeys(one["algo"] for one in these)))
            for key, these in runs.items()}


def against_itself(result):
    """Per config of a --suite --json entry with `itself`: the rows of one choice compared
    with themselves in other processes (Note [the suite against itself])."""
    figures = {}
    itself = result.get("itself", {})
    for d in result.get("dnnx", []):
        other = itself.get(d.get("case"))
        if d.get("kind") != "case" or other is None:
            continue
        m = figures.setdefault(d["config"], dict(itself_rows=0, itself_changed=0,
                                                 itself_above=[], itself_beyond=[],
                                                 itself_ratios=[], by_round=[]))
        if len(set(d.get("algos", [d["algo"]])) | set(other["algos"])) > 1:
            m["itself_changed"] += 1
            continue
        ratio = d["kernel_ms"] / other["kernel_ms"]
        m["itself_rows"] += 1
        m["itself_ratios"].append(ratio)
        for k, (mine, theirs) in enumerate(zip(d.get("rounds", []), other["rounds"])):
            if len(m["by_round"]) <= k:
                m["by_round"].append([])
            m["by_round"][k].append(mine["kernel_ms"] / theirs)
        is_above, beyond = above_one(ratio, rounds_spread(d, other))
        if is_above:
            row = f"{d['layer']} {d['direction']} ({ratio:.3f})"
            m["itself_above"].append(row)
            if beyond:
                m["itself_beyond"].append(row)
    for m in figures.values():
        ratios = m.pop("itself_ratios")
        if ratios:
            m["itself_median_ratio"] = statistics.median(ratios)
        # Per round, the median over the rows of that round's two processes against each other:
        # the first round's process searched, the second settled the late plans.
        m["itself_round_medians"] = [statistics.median(one) for one in m.pop("by_round")]
    return figures


def add_against_itself(result):
    """Puts against_itself's figures into the entry's summary and prints them."""
    for config, m in against_itself(result).items():
        result["summary"].setdefault(config, {}).update(m)
        within = [row for row in m["itself_above"] if row not in m["itself_beyond"]]
        print(f"against itself ({config}; Note [the suite against itself]): {m['itself_rows']} "
              f"rows of one choice in every process, {len(m['itself_above'])} above 1.00, "
              f"{len(m['itself_beyond'])} of them beyond both sides' spread"
              + (f": {'; '.join(m['itself_beyond'])}" if m["itself_beyond"] else "")
              + (f"; within it: {'; '.join(within)}" if within else "")
              + (f"; median ratio {m['itself_median_ratio']:.3f}"
                 if "itself_median_ratio" in m else "")
              + (f" (per round: {', '.join(f'{x:.4f}' for x in m['itself_round_medians'])})"
                 if m["itself_round_medians"] else "")
              + f"; rows whose choice changed between processes: {m['itself_changed']}\n")


def write_results(json_path, results):
    """The suite's JSON, replaced whole (through a temporary file, so that a run killed while
    writing leaves the previous version)."""
    folder = os.path.dirname(os.path.abspath(json_path))
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as f:
        json.dump(results, f, indent=1)
    os.replace(f.name, json_path)


def print_suite_summary(results):
    """The summary table: one row per file and config of `results` (run_suite's list)."""
    reuse = any("reuse_median_ms" in m for r in results for m in r["summary"].values())
    print("\n## Suite summary\n")
    print("| file | config | batch | dnnx ms | torch ms | dnnx/torch | worst row | rows above "
          "1.00 (beyond the rounds' spread) | median search s | worst search s |"
          + (" second process: median / worst ms, share of the search (after it); late plans, "
             "ms each | first process's next step: share, late plans |" if reuse else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if reuse else ""))
    for r in results:
        for config, m in r["summary"].items():
            later = ""
            if reuse:
                after = (f" ({100 * m['reuse_after_share']:.1f}%)"
                         if "reuse_after_share" in m else "")
                late = (f"; {m['reuse_late_plans']}, {m['reuse_ms_per_late_plan']:.0f} ms"
                        if "reuse_ms_per_late_plan" in m else "")
                later = (f" {m['reuse_median_ms']:.1f} / {m['reuse_worst_ms']:.1f}, "
                         f"{100 * m['reuse_share']:.1f}%{after}{late} |"
                         if "reuse_median_ms" in m else " |")
                later += (f" {100 * m['next_step_share']:.1f}%, {m['next_step_late_plans']} |"
                          if "next_step_share" in m else " |")
            # Runs before the count was kept give "-".
            above = (f"{m['rows_above']} ({len(m['rows_above_beyond_spread'])})"
                     if "rows_above" in m else "-")
            if "rows_above_checked" in m:  # Note [rows above 1.00 in one process]
                still = m["rows_above_one_process"]
                above += (f"; in one process {len(still)} of {m['rows_above_checked']} checked"
                          + (f": {', '.join(still)}" if still else ""))
            print(f"| {r['file']} | {config} | {m['batch']} | {m['dnnx_ms']:.3f} "
                  f"| {m['torch_ms']:.3f} | {m['ratio']:.2f} | {m['worst_row']} "
                  f"({m['worst_ratio']:.2f}) | {above} | {m['search_median_s']:.2f} "
                  f"| {m['search_worst_s']:.2f} ({m['search_worst_row']}) |" + later)
    itself = [(r["file"], config, m) for r in results for config, m in r["summary"].items()
              if "itself_rows" in m]
    if itself:
        print("\nAgainst itself (Note [the suite against itself]): the rows of one choice, dnnx's "
              "rounds against as many more processes with the same choices\n")
        print("| file | config | rows | above 1.00 | beyond both sides' spread | median ratio "
              "| per round | rows whose choice changed |")
        print("|---|---|--:|--:|---|--:|---|--:|")
        for name, config, m in itself:
            beyond = "; ".join(m["itself_beyond"]) or "none"
            median = (f"{m['itself_median_ratio']:.3f}" if "itself_median_ratio" in m else "-")
            rounds = ", ".join(f"{x:.4f}" for x in m.get("itself_round_medians", [])) or "-"
            print(f"| {name} | {config} | {m['itself_rows']} | {len(m['itself_above'])} "
                  f"| {len(m['itself_beyond'])}: {beyond} | {median} | {rounds} "
                  f"| {m['itself_changed']} |")


# Note [suite shards]
# The whole suite in three rounds takes longer than one GPU gives a session, so it runs in
# shards: one process per GPU, each on its own files, none sharing a GPU with another (a shared
# GPU would time both sides of a run under the other's load). A shard's results are the list a
# single run writes, so merging is concatenation in the order given; a file in two shards is an
# error, as its rows would be counted twice. A shard may be gzipped (a name ending in .gz), as
# bench/results keeps the large ones.
def print_file_tables(result):
    """A --suite --json file entry's per-row tables again, as its run printed them: each layer's
    rows with the medians, the choice and the speedup, from the records and PyTorch's rows kept
    (its layers read from the shapes file of bench/shapes/ it names)."""
    path = os.path.join(HERE, "shapes", result["file"])
    try:
        shapes, _ = read_shapes_file(path, "all")
    except (OSError, ShapesError) as error:
        raise ShapesError(f"--rows: cannot read the layers of {result['file']}: {error}") from error
    ran = {r["layer"] for r in result["dnnx"] if r.get("kind") == "case"}
    shapes = [s for s in shapes if s["name"] in ran]
    configs = list(result["summary"])
    device = next((r for r in result["dnnx"] if r.get("kind") == "device"), {})
    info = result.get("torch_info", {})
    print(f"\n## {result['file']}: batch {result['batch']}, {len(shapes)} layers, "
          f"{result['rounds']} round(s)\n")
    print(f"GPU: {info.get('gpu', '?')}; dnnx: {device.get('fingerprint', '?')}; "
          f"PyTorch {info.get('torch', '?')} (cuDNN {info.get('cudnn', '?')}), "
          f"cudnn.benchmark=True, TF32 off\n")
    with contextlib.redirect_stderr(io.StringIO()):
        return print_tables(argparse.Namespace(configs=configs), shapes, result["dnnx"],
                            result["torch"], result["batch"])


def read_suite_json(path, what):
    """The entries of a --suite --json file (gzip when it ends in .gz), or of a member of a .tar.gz
    archive as bench/results keeps them (ARCHIVE.tar.gz:MEMBER); ShapesError naming `what` (the
    option that named it) when it cannot be read or is not one."""
    archive_path, _, member = path.partition(".tar.gz:")
    member = member.removeprefix("./")
    try:
        if member:
            with tarfile.open(archive_path + ".tar.gz") as archive:
                names = {m.name.removeprefix("./"): m for m in archive.getmembers() if m.isfile()}
                if member not in names:
                    raise ShapesError(f"{what}: {archive_path}.tar.gz has no member {member}")
                shard = json.load(archive.extractfile(names[member]))
        else:
            with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
                shard = json.load(f)
    except (OSError, ValueError, tarfile.TarError) as error:
        raise ShapesError(f"{what}: cannot read {path}: {error}") from error
    if not isinstance(shard, list) or not all(isinstance(r, dict) and "summary" in r
                                              and "file" in r for r in shard):
        raise ShapesError(f"{what}: {path} is not a --suite --json file")
    return shard


def rows_above_one(result):
    """[(layer, direction, config, ratio, beyond)] of a --suite --json file's entry: its rows whose
    ratio prints above 1.00, and whether each is beyond both sides' spread over the rounds (Note
    [rows above 1.00 and the rounds' spread]), in the order of its records."""
    torch_results = result.get("torch", {})
    rows = []
    for d in result.get("dnnx", []):
        t = torch_results.get(d.get("case"))
        if d.get("kind") != "case" or not t or not t.get("kernel_ms"):
            continue
        ratio = d["kernel_ms"] / t["kernel_ms"]
        is_above, beyond = above_one(ratio, rounds_spread(d, t))
        if is_above:
            rows.append((d["layer"], d["direction"], d["config"], ratio, beyond))
    return rows


# Note [rows above 1.00 in one process]
# A row above 1.00 of the suite can be timed again with PyTorch in the same process, the two
# sides' loops taking turns (bench/interleaved_rows.py, Note [interleaved turns] there): that
# removes the process-to-process variation the rounds' spread measures. --merge --interleaved
# reads such results (the script's --json files, or .tar.gz archives of them as bench/results
# keeps them) and gives each file's rows above 1.00 their ratio there: how many were checked and
# how many are still above 1.00 (as printed) in one process, a row timed more than once by the
# median of its ratios. The rows' medians over the rounds stay what the tables report.
def read_interleaved(paths):
    """{(file, layer, direction, config): [ratios]} of bench/interleaved_rows.py --json files or
    .tar.gz archives of them (every .json member); ShapesError for what cannot be read."""
    documents = []
    for path in paths:
        try:
            if path.endswith((".tar.gz", ".tgz")):
                with tarfile.open(path) as archive:
                    for member in archive.getmembers():
                        if member.isfile() and member.name.endswith(".json"):
                            documents.append((f"{path}:{member.name}",
                                              json.load(archive.extractfile(member))))
            else:
                with open(path) as f:
                    documents.append((path, json.load(f)))
        except (OSError, ValueError, tarfile.TarError) as error:
            raise ShapesError(f"--interleaved: cannot read {path}: {error}") from error
    ratios = {}
    for where, document in documents:
        # The script's --json: {"files": [{"file", "rows"}]}; a file of one shapes file:
        # {"file", "rows"}.
        files = document.get("files", [document]) if isinstance(document, dict) else None
        if not files or not all(isinstance(f, dict) and "file" in f and "rows" in f
                                for f in files):
            raise ShapesError(f"--interleaved: {where} is not an interleaved_rows.py --json file")
        for f in files:
            for row in f["rows"]:
                if "ratio" in row:
                    key = (f["file"], row["layer"], row["direction"], row["config"])
                    ratios.setdefault(key, []).append(row["ratio"])
    return ratios


def one_process_figures(result, ratios):
    """For a --suite --json file's entry, per config: of its rows above 1.00, how many have a
    ratio in one process (`ratios`, read_interleaved's) and which are above 1.00 there (Note
    [rows above 1.00 in one process])."""
    figures = {}
    for layer, direction, config, _, _ in rows_above_one(result):
        m = figures.setdefault(config, dict(rows_above_checked=0, rows_above_one_process=[]))
        found = ratios.get((result["file"], layer, direction, config))
        if found:
            m["rows_above_checked"] += 1
            ratio = statistics.median(found)
            if round(ratio, 2) > 1.0:
                m["rows_above_one_process"].append(f"{layer} {direction} ({ratio:.3f})")
    return figures


def merge_suites(paths, json_path=None, rows=False, interleaved=None, latest=False):
    """The one suite of the shards in `paths`, in their order; a file in more than one shard is
    an error, or with `latest` taken from the last shard that has it (a later run of that file,
    in the place of its first)."""
    results = []
    for path in paths:
        shard = read_suite_json(path, "--merge")
        at = {r["file"]: i for i, r in enumerate(results)}  # the shards before this one
        twice = sorted(at.keys() & {r["file"] for r in shard})
        if twice and not latest:
            raise ShapesError(f"--merge: {', '.join(twice)} in more than one shard ({path})")
        for result in shard:
            if result["file"] in at:
                results[at[result["file"]]] = result
            else:
                results.append(result)
    # The summaries again from the rows, so that a file run before a figure of the summary
    # existed (the rows above 1.00) has it too; the tables printed only with `rows`. Without
    # `rows`, a result whose rows cannot be read again (no records kept, a shapes file renamed
    # since) keeps the summary it was written with.
    for result in results:
        if not rows and not ("dnnx" in result and "torch" in result):
            continue
        try:
            with contextlib.nullcontext() if rows else contextlib.redirect_stdout(io.StringIO()):
                again = print_file_tables(result)
        except ShapesError:
            if rows:
                raise
            continue
        for config, figures in again.items():
            result["summary"].setdefault(config, {}).update(figures)
        if "itself" in result:
            with contextlib.nullcontext() if rows else contextlib.redirect_stdout(io.StringIO()):
                add_against_itself(result)
    if interleaved:
        ratios = read_interleaved(interleaved)
        for result in results:
            for config, figures in one_process_figures(result, ratios).items():
                result["summary"].setdefault(config, {}).update(figures)
    print_suite_summary(results)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default=os.path.join(HERE, "..", "build", "bench",
                                                        "cudnn_conv_bench"))
    parser.add_argument("--shapes", default=os.path.join(HERE, "shapes", "resnet50.txt"))
    parser.add_argument("--tag", default=None,
                        help="layers carrying this tag ('all': every layer; default: bench, and "
                             "all for --suite)")
    parser.add_argument("--batch", type=int, default=None,
                        help="batch (default: the shapes file's batch=N line, else 64)")
    parser.add_argument("--configs", default="f16_nhwc,f32_nchw")
    parser.add_argument("--loop", type=int, default=50)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--dnnx-results",
                        help="read cudnn_conv_bench's output from this file instead of running "
                             "it; several files, comma-separated, give one set of tables each "
                             "against the same PyTorch run")
    parser.add_argument("--suite", action="store_true",
                        help="run the shape suite: every bench/shapes/*.txt but resnet50, or "
                             "--files")
    parser.add_argument("--files", help="suite files, comma-separated: names in bench/shapes "
                                        "(mobilenetv2) or paths")
    parser.add_argument("--max-layers", type=int, default=0,
                        help="only the first N layers of each file")
    parser.add_argument("--budget-s", type=float, default=0,
                        help="suite: start no new layer (dnnx) or file after this many seconds")
    parser.add_argument("--rounds", type=int, default=1,
                        help="suite: per file, the benchmark and PyTorch take turns this many "
                             "times; rows give the medians (Note [suite rounds])")
    parser.add_argument("--reuse-choices", action="store_true",
                        help="suite, with --rounds 2 or more: the first round keeps its choices "
                             "in a file and the later rounds run them as a later process would "
                             "(Note [suite rounds])")
    parser.add_argument("--against-itself", action="store_true",
                        help="suite, with --reuse-choices: each round also runs the benchmark "
                             "once more with the choices kept, and the rows of one choice are "
                             "compared with themselves in those processes (Note [the suite "
                             "against itself])")
    parser.add_argument("--torch-kernels", action="store_true",
                        help="also run each PyTorch row a few more calls under torch.profiler "
                             "and keep the kernels it launched (Note [PyTorch's kernels])")
    parser.add_argument("--merge", help="comma-separated --suite --json files of shards (or "
                        "ARCHIVE.tar.gz:MEMBER of bench/results' archives): print their one suite "
                        "summary (and write them together with --json)")
    parser.add_argument("--latest", action="store_true",
                        help="with --merge: a file in more than one shard is taken from the last "
                             "that has it (a later run of it), where it would be an error")
    parser.add_argument("--rows", action="store_true",
                        help="with --merge: each file's per-row tables (the choices among them) "
                             "before the summary")
    parser.add_argument("--interleaved", default="",
                        help="with --merge: bench/interleaved_rows.py --json files or .tar.gz "
                             "archives of them (commas): the rows above 1.00 in one process "
                             "(Note [rows above 1.00 in one process])")
    parser.add_argument("--dry-run", action="store_true",
                        help="suite: list the layers and their descs; needs no GPU")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # tables reach a redirected file as they come
    if args.merge:
        try:
            merge_suites(args.merge.split(","), args.json, rows=args.rows,
                         interleaved=args.interleaved.split(",") if args.interleaved else None,
                         latest=args.latest)
        except ShapesError as error:
            sys.exit(f"compare_gpu.py: {error}")
        return
    args.configs = args.configs.split(",")
    suite = args.suite or args.files or args.dry_run
    if args.rounds < 1:
        sys.exit("compare_gpu.py: --rounds must be 1 or more")
    if args.rounds > 1 and not suite:
        sys.exit("compare_gpu.py: --rounds runs with the suite (--suite or --files)")
    if args.reuse_choices and args.rounds < 2:
        sys.exit("compare_gpu.py: --reuse-choices needs --rounds 2 or more")
    if args.against_itself and not args.reuse_choices:
        sys.exit("compare_gpu.py: --against-itself needs --reuse-choices (the choices it runs "
                 "again)")
    if args.tag is None:
        args.tag = "all" if suite else "bench"
    try:
        if suite:
            run_suite(args)
            return
        shapes, file_batch = read_shapes_file(args.shapes, args.tag)
    except ShapesError as error:
        sys.exit(f"compare_gpu.py: {error}")
    batch = args.batch or file_batch or 64

    torch_results, torch_info = None, None
    runs = args.dnnx_results.split(",") if args.dnnx_results else [None]
    all_records = []
    for results_file in runs:
        records = run_dnnx(args, results_file)
        all_records.append(records)
        if torch_results is None:
            torch_results, torch_info = run_torch(args, shapes, batch)
        if results_file:
            print(f"\n## dnnx results: {results_file}")
        device = next((r for r in records if r["kind"] == "device"), {})

        print(f"\nGPU: {torch_info['gpu']}; dnnx: {device.get('fingerprint', '?')}; "
              f"PyTorch {torch_info['torch']} (cuDNN {torch_info['cudnn']}), "
              f"cudnn.benchmark=True, TF32 off; batch {batch}\n")
        print_tables(args, shapes, records, torch_results, batch)
    print_overhead(all_records[-1], torch_info)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(dnnx=records if len(all_records) == 1 else all_records,
                           torch=torch_results, torch_info=torch_info), f, indent=1)


if __name__ == "__main__":
    main()
