#!/usr/bin/python3
"""dnnx's cpu convolution next to raw oneDNN and PyTorch, on the benchmark shapes of ResNet-50.

In one run, with the same thread count for everything:
  1. peak_fma measures the machine's AVX-512 fp32 (and bf16 dot-product) arithmetic peak;
  2. for every case, one after the other: PyTorch (torch.nn.functional.conv2d,
     torch.ops.aten.convolution_backward) times it, then onednn_direct_bench (oneDNN's best
     implementation, three memory set-ups) and conv_bench (dnnx, cpu backend, exhaustive
     selection) time it, each in its own process filtered to that case (--benchmark_format=json);
  3. peak_fma again, to show whether the machine's capacity changed during the run;
then prints a markdown table and whether the targets are met (below: TARGET_*; docs/benchmarks.md,
"CPU convolution vs oneDNN and PyTorch").

Why case by case (Note [interleaving]): on a shared virtual machine the capacity the host gives
the vCPUs changes over minutes (two vCPUs sometimes deliver one core's worth). Timing all of
PyTorch, then all of oneDNN, then all of dnnx would compare them under different conditions;
interleaving per case keeps the three measurements of a case seconds apart. A probe (peak_fma
--probe, all threads at once) before and after each case records the capacity the case ran on;
a case that ran below 90% of the peak is timed again (--retries), and cases still below are marked
in the table. --no-interleave runs the three tools one after the other instead (PyTorch first,
then one process per C++ benchmark).

Cases run in the same order everywhere: dtype, then shape (file order), then direction. Every tool
times a case the same way (Note [timing method] in bench_common.hpp): selection untimed, one
untimed call, a warm-up, then --repetitions repetitions of back-to-back calls filling --min-time
seconds each; the figure is the median of the repetitions' mean time per call (the fastest
repetition is kept too). With --rounds N every case runs N times and its figure is the median over
the rounds.

Runs with Debian's /usr/bin/python3 (python3-torch 1.13, python3-numpy). Example:
  /usr/bin/python3 bench/compare_cpu.py --build-dir build-bench --json-out results.json
"""

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIRECTIONS = ("fwd", "bwd_data", "bwd_weights")
DTYPES = ("f32", "bf16")
# The CPU convolution targets (docs/benchmarks.md, "CPU convolution vs oneDNN and PyTorch").
TARGET_OVERHEAD = 1.05        # dnnx time / raw oneDNN time
TARGET_VS_PYTORCH = 0.85      # dnnx total / PyTorch total
TARGET_3X3_PEAK = 0.70        # fraction of the fp32 peak on the 3x3 layers
ONEDNN_SETUPS = ("plain", "any", "nhwc", "reorders", "nhwc_reorders")  # onednn_direct_bench's
DISTURBED = 0.90              # a case ran on a disturbed machine below this fraction of the peak
VERBOSE = False  # --verbose: print every command and its duration


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build-bench"),
                        help="CMake build directory holding bench/{conv_bench,onednn_direct_bench,"
                             "peak_fma} (default: %(default)s)")
    parser.add_argument("--shapes", default=os.path.join(REPO, "bench", "shapes", "resnet50.txt"),
                        help="shape file (default: %(default)s)")
    parser.add_argument("--tag", default="bench", help="shapes carrying this tag; 'all' for every "
                        "shape (default: %(default)s)")
    parser.add_argument("--batch", type=int, default=8, help="images per call (default: 8)")
    parser.add_argument("--dtypes", default="f32,bf16", help="comma list of f32, bf16")
    parser.add_argument("--threads", type=int, default=2,
                        help="OMP_NUM_THREADS and torch.set_num_threads (default: 2)")
    parser.add_argument("--repetitions", type=int, default=5, help="timed repetitions (median)")
    parser.add_argument("--min-time", type=float, default=0.1,
                        help="seconds of back-to-back calls per repetition")
    parser.add_argument("--warmup", type=float, default=0.05, help="warm-up seconds per case")
    parser.add_argument("--json-out", help="also write every raw result here (JSON)")
    parser.add_argument("--log", help="write the oneDNN implementation sweep (stderr of "
                        "onednn_direct_bench) here")
    parser.add_argument("--verbose", action="store_true",
                        help="print every command run and its duration")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every case this many times (each round in the same order); a "
                             "case's figure is the median over the rounds (default: 1)")
    parser.add_argument("--retries", type=int, default=2,
                        help="time a case again, up to this many times, when the machine had less "
                             "than 90%% of its peak while it ran (see Note [interleaving]; default: "
                             "2)")
    parser.add_argument("--no-interleave", dest="interleave", action="store_false",
                        help="time all cases with PyTorch, then with oneDNN, then with dnnx, "
                             "instead of case by case (see Note [interleaving])")
    parser.add_argument("--from-json", help="print the table from a --json-out file, run nothing")
    args = parser.parse_args()
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    for dtype in args.dtypes:
        if dtype not in DTYPES:
            parser.error(f"--dtypes: unknown dtype '{dtype}', accepted: {', '.join(DTYPES)}")
    if args.retries < 0:
        parser.error(f"--retries must be >= 0, got {args.retries}")
    for name in ("batch", "threads", "repetitions", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.min_time <= 0 or args.warmup < 0:
        parser.error(f"--min-time must be > 0 and --warmup >= 0, got {args.min_time}, {args.warmup}")
    return args


def read_shapes(path, tag):
    """The same format and checks as bench_common.hpp's read_shapes."""
    shapes = []
    with open(path) as lines:
        for number, line in enumerate(lines, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            where = f"{path}:{number}"
            if len(fields) < 6:
                sys.exit(f"{where}: expected 'name CxHxW OxCgxKHxKW stride pad count [tags]', "
                         f"got {len(fields)} fields")
            try:
                c, h, w = (int(v) for v in fields[1].split("x"))
                o, cg, kh, kw = (int(v) for v in fields[2].split("x"))
                stride, pad = int(fields[3]), int(fields[4])
            except ValueError:
                sys.exit(f"{where}: bad sizes in '{line.strip()}'")
            shape = dict(name=fields[0], c=c, h=h, w=w, o=o, cg=cg, kh=kh, kw=kw, stride=stride,
                         pad=pad, groups=c // cg, tags=fields[6:])
            shape["oh"] = (h + 2 * pad - kh) // stride + 1
            shape["ow"] = (w + 2 * pad - kw) // stride + 1
            if tag == "all" or tag in shape["tags"]:
                shapes.append(shape)
    if not shapes:
        sys.exit(f"no shape in {path} carries tag '{tag}'")
    return shapes


def macs(shape, batch):
    return batch * shape["o"] * shape["oh"] * shape["ow"] * shape["cg"] * shape["kh"] * shape["kw"]


def describe(shape, batch):
    return (f"{batch}x{shape['c']}x{shape['h']}x{shape['w']} * "
            f"{shape['o']}x{shape['cg']}x{shape['kh']}x{shape['kw']} s{shape['stride']} "
            f"p{shape['pad']}")


def case_name(shape, direction, dtype):
    return f"{shape['name']}/{direction}/{dtype}"


def time_call(fn, warmup, min_time, repetitions):
    """Google Benchmark's method (Note [timing method]): median over repetitions of the mean time
    per call, each repetition as many calls as fill min_time. Returns milliseconds."""
    fn()
    start = time.perf_counter()
    calls = 0
    while True:
        fn()
        calls += 1
        if time.perf_counter() - start >= warmup:
            break
    per_call = (time.perf_counter() - start) / calls
    iterations = max(1, math.ceil(min_time / max(per_call, 1e-9)))
    means = []
    for _ in range(repetitions):
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        means.append((time.perf_counter() - start) / iterations)
    return statistics.median(means) * 1e3, min(means) * 1e3


class PyTorchTimer:
    """Times one case at a time, so that the comparison can interleave the tools."""

    def __init__(self, args):
        import numpy
        import torch
        self.torch = torch
        self.args = args
        torch.set_num_threads(args.threads)
        self.info = {"torch": torch.__version__, "numpy": numpy.__version__,
                     "torch_threads": torch.get_num_threads(),
                     "mkldnn": torch.backends.mkldnn.is_available(),
                     "torch_config": torch.__config__.show()}
        self.generator = torch.Generator().manual_seed(0)
        self.tensors_key = None

    def _tensors(self, shape, dtype):
        # The three tensors of a shape, kept while its directions run (as the C++ benchmarks do).
        key = (shape["name"], dtype)
        if self.tensors_key != key:
            torch = self.torch
            torch_dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]

            def make(*size):
                values = torch.rand(*size, generator=self.generator) * 2 - 1
                return values.to(torch_dtype).contiguous()  # channels_first
            batch = self.args.batch
            self.tensors = (make(batch, shape["c"], shape["h"], shape["w"]),
                            make(shape["o"], shape["cg"], shape["kh"], shape["kw"]),
                            make(batch, shape["o"], shape["oh"], shape["ow"]))
            self.tensors_key = key
        return self.tensors

    def time(self, shape, direction, dtype):
        torch = self.torch
        src, weights, diff_dst = self._tensors(shape, dtype)
        stride, pad, groups = [shape["stride"]] * 2, [shape["pad"]] * 2, shape["groups"]
        if direction == "fwd":
            def call():
                return torch.nn.functional.conv2d(src, weights, None, stride, pad, 1, groups)
        else:
            mask = [direction == "bwd_data", direction == "bwd_weights", False]

            def call():
                return torch.ops.aten.convolution_backward(
                    diff_dst, src, weights, None, stride, pad, [1, 1], False, [0, 0], groups, mask)
        try:
            median, fastest = time_call(call, self.args.warmup, self.args.min_time,
                                        self.args.repetitions)
            return {"ms": median, "min_ms": fastest}
        except RuntimeError as error:  # e.g. a dtype this build cannot run
            return {"error": str(error).splitlines()[0]}


def run_tool(command, env, stderr_to=None):
    if VERBOSE:
        print("  $ " + " ".join(command), file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if stderr_to is not None:
        stderr_to.append(done.stderr)
    if done.returncode != 0:
        sys.exit(f"{command[0]} failed with exit code {done.returncode}:\n{done.stderr[-4000:]}")
    if VERBOSE:
        print(f"    ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    return done.stdout


def benchmark_results(document):
    """Google Benchmark JSON -> {case name: {ms, min_ms, label, ...}} from the median and min
    aggregates."""
    results = {}
    for entry in document["benchmarks"]:
        name = entry.get("run_name", entry["name"]).removesuffix("/real_time")
        if entry.get("error_occurred"):
            results[name] = {"error": entry.get("error_message", "error")}
            continue
        if entry.get("run_type") != "aggregate":
            continue
        assert entry["time_unit"] == "ms", entry
        row = results.setdefault(name, {})
        if entry.get("aggregate_name") == "min":
            row["min_ms"] = entry["real_time"]
        elif entry.get("aggregate_name") == "median":
            row.update(ms=entry["real_time"], label=entry.get("label", ""))
            for counter in ("tuning_ms", "candidates_timed", "sweep_ms", "impls_timed"):
                if counter in entry:
                    row[counter] = entry[counter]
    return document["context"], results


def machine_info():
    info = {"platform": platform.platform()}
    try:
        lscpu = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return info
    for line in lscpu.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "Hypervisor vendor"):
            info[key.strip()] = value.strip()
        if key.strip() == "Flags":
            flags = value.split()
            info["flags"] = [f for f in flags if f.startswith(("avx512", "amx", "avx_vnni", "fma"))]
    return info


def case_filter(names, direct):
    """A --benchmark_filter matching exactly these cases (the direct benchmark's names carry the
    memory set-up as one more part)."""
    import re
    alternatives = "|".join(re.escape(name) for name in names)
    setups = f"/({'|'.join(ONEDNN_SETUPS)})" if direct else ""
    return f"^({alternatives}){setups}(/|$)"


def run_everything(args):
    if "OMP_NUM_THREADS" in os.environ and os.environ["OMP_NUM_THREADS"] != str(args.threads):
        print(f"note: OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']} replaced by --threads "
              f"{args.threads}", file=sys.stderr)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch loads its OpenMP runtime
    env = dict(os.environ)
    shapes = read_shapes(args.shapes, args.tag)
    tools = {name: os.path.join(args.build_dir, "bench", name)
             for name in ("peak_fma", "onednn_direct_bench", "conv_bench")}
    for name, path in tools.items():
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} not found: build it first (ninja -C {args.build_dir} {name})")
    raw = {"args": {k: v for k, v in vars(args).items()}, "machine": machine_info(),
           "shapes": shapes, "load_before": os.getloadavg(), "started": time.time(),
           "rounds": [], "onednn_sweep": ""}

    print("peak_fma", file=sys.stderr, flush=True)
    peak_command = [tools["peak_fma"], "--threads", str(args.threads), "--json"]
    raw["peak"] = json.loads(run_tool(peak_command, env))
    probe_command = peak_command + ["--probe", "--seconds", "0.1"]

    def probe():
        return json.loads(run_tool(probe_command, env))["fp32_gflops_all_threads"]

    timer = PyTorchTimer(args)
    raw["pytorch_info"] = timer.info
    common = [f"--shapes={args.shapes}", f"--tag={args.tag}", f"--batch={args.batch}",
              f"--dtypes={','.join(args.dtypes)}", "--benchmark_format=json",
              f"--benchmark_min_warmup_time={args.warmup}",
              f"--benchmark_min_time={args.min_time}",
              f"--benchmark_repetitions={args.repetitions}",
              "--benchmark_report_aggregates_only=true"]
    cases = [(shape, direction, dtype) for dtype in args.dtypes for shape in shapes
             for direction in DIRECTIONS]
    groups = [[case] for case in cases] if args.interleave else [cases]
    def measure(group, measured, title):
        """Times one group of cases with the three tools, into `measured`."""
        names = [case_name(*case) for case in group]
        label = names[0] if len(names) == 1 else f"{len(names)} cases"
        print(f"[{title}] {label}", file=sys.stderr, flush=True)
        capacity_before = probe()
        for case, name in zip(group, names):
            measured["pytorch"][name] = timer.time(*case)
        sweep = []
        context, results = benchmark_results(json.loads(run_tool(
            [tools["onednn_direct_bench"]] + common
            + [f"--benchmark_filter={case_filter(names, direct=True)}"], env, sweep)))
        raw["onednn_context"] = context
        measured["onednn"].update(results)
        raw["onednn_sweep"] += sweep[0]
        context, results = benchmark_results(json.loads(run_tool(
            [tools["conv_bench"]] + common
            + [f"--benchmark_filter={case_filter(names, direct=False)}"], env)))
        raw["dnnx_context"] = context
        measured["dnnx"].update(results)
        capacity = min(capacity_before, probe())
        for name in names:
            measured["capacity"][name] = capacity
            onednn = ", ".join(
                f"{setup} {fmt(measured['onednn'].get(f'{name}/{setup}', {}).get('ms'))}"
                for setup in ONEDNN_SETUPS)
            print(f"    {name}: pytorch {fmt(measured['pytorch'][name].get('ms'))}, oneDNN "
                  f"{onednn}, dnnx {fmt(measured['dnnx'].get(name, {}).get('ms'))} ms; "
                  f"machine {capacity:.0f} GFLOP/s", file=sys.stderr, flush=True)

    groups = [[case] for case in cases] if args.interleave else [cases]
    floor = DISTURBED * raw["peak"]["fp32_peak_gflops"]
    for round_number in range(1, args.rounds + 1):
        measured = {"pytorch": {}, "onednn": {}, "dnnx": {}, "capacity": {}, "retried": {}}
        raw["rounds"].append(measured)
        for number, group in enumerate(groups, 1):
            measure(group, measured, f"round {round_number}/{args.rounds}, {number}/{len(groups)}")
        # Note [interleaving]: a case timed while the host took capacity away is timed again
        # (all three tools, so they stay comparable); the attempt on the fuller machine is kept.
        for attempt in range(1, args.retries + 1):
            disturbed = [group for group in groups if min(
                measured["capacity"][case_name(*case)] for case in group) < floor]
            if not disturbed:
                break
            for number, group in enumerate(disturbed, 1):
                again = {"pytorch": {}, "onednn": {}, "dnnx": {}, "capacity": {}}
                measure(group, again, f"round {round_number}, retry {attempt}, {number}/"
                        f"{len(disturbed)}")
                names = [case_name(*case) for case in group]
                if again["capacity"][names[0]] > measured["capacity"][names[0]]:
                    for tool in ("pytorch", "dnnx", "capacity"):
                        measured[tool].update({n: again[tool][n] for n in names if n in again[tool]})
                    measured["onednn"].update(again["onednn"])
                for name in names:
                    measured["retried"][name] = measured["retried"].get(name, 0) + 1
    combine_rounds(raw)
    if args.log:
        with open(args.log, "w") as log:
            log.write(raw["onednn_sweep"])

    print("peak_fma again", file=sys.stderr, flush=True)
    raw["peak_after"] = json.loads(run_tool(peak_command, env))
    raw["load_after"] = os.getloadavg()
    raw["wall_s"] = time.time() - raw["started"]
    return raw


def combine_rounds(raw):
    """raw["pytorch"], ["onednn"], ["dnnx"], ["capacity"]: per case, the median over the rounds
    of the median times, the fastest repetition of any round, and every label that won."""
    for tool in ("pytorch", "onednn", "dnnx"):
        combined = {}
        names = {name for measured in raw["rounds"] for name in measured[tool]}
        for name in names:
            rows = [measured[tool][name] for measured in raw["rounds"] if name in measured[tool]]
            timed = [row for row in rows if "ms" in row]
            if not timed:
                combined[name] = rows[0]
                continue
            labels = []
            for row in timed:
                if row.get("label") and row["label"] not in labels:
                    labels.append(row["label"])
            combined[name] = {"ms": statistics.median(row["ms"] for row in timed),
                              "min_ms": min(row.get("min_ms", row["ms"]) for row in timed),
                              "label": " / ".join(labels),
                              "rounds_ms": [row["ms"] for row in timed]}
        raw[tool] = combined
    raw["capacity"] = {
        name: statistics.median(measured["capacity"][name] for measured in raw["rounds"])
        for name in raw["rounds"][0]["capacity"]}
    raw["retried"] = {}
    for measured in raw["rounds"]:
        for name, count in measured.get("retried", {}).items():
            raw["retried"][name] = raw["retried"].get(name, 0) + count


def fastest(**setups):
    """The fastest of oneDNN's set-ups {name: result row} by median, its label naming the set-up;
    min_ms is the fastest repetition of any of them."""
    timed = [(row["ms"], name, row) for name, row in setups.items() if "ms" in row]
    if not timed:
        return {}
    ms, name, row = min(timed, key=lambda entry: entry[0])
    return {"ms": ms, "impl": f"{row.get('label', '?')} [{name}]",
            "min_ms": min(r.get("min_ms", r["ms"]) for _, _, r in timed)}


def round_summary(measured, shapes, dtype, batch, peak):
    """One round's totals for `dtype`: dnnx over oneDNN user-layout and over PyTorch, the cases
    within 5% of the yardstick and the 3x3 cases at >= 70% of the peak; None if incomplete."""
    dnnx_total = user_total = torch_total = 0.0
    within = cases = good_3x3 = cases_3x3 = 0
    for shape in shapes:
        for direction in DIRECTIONS:
            name = case_name(shape, direction, dtype)
            dnnx = measured["dnnx"].get(name, {}).get("ms")
            torch_ms = measured["pytorch"].get(name, {}).get("ms")
            user = fastest(**{k: measured["onednn"].get(f"{name}/{k}", {})
                              for k in ("plain", "reorders", "nhwc_reorders")}).get("ms")
            if dnnx is None or torch_ms is None or user is None:
                return None
            dnnx_total += dnnx
            user_total += user
            torch_total += torch_ms
            cases += 1
            within += dnnx <= TARGET_OVERHEAD * user
            if shape["kh"] == 3 and shape["kw"] == 3:
                cases_3x3 += 1
                good_3x3 += 2.0 * macs(shape, batch) / (dnnx * 1e-3) * 1e-9 >= TARGET_3X3_PEAK * peak
    return {"user": dnnx_total / user_total, "pytorch": dnnx_total / torch_total,
            "within": within, "cases": cases, "good_3x3": good_3x3, "cases_3x3": cases_3x3}


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(value, digits=2, suffix=""):
    return "n/a" if value is None else f"{value:.{digits}f}{suffix}"


def render(raw):
    args = raw["args"]
    batch = args["batch"]
    shapes = raw["shapes"]
    peak = raw["peak"]["fp32_peak_gflops"]
    lines = []
    out = lines.append
    machine = raw["machine"]
    out(f"Machine: {machine.get('Model name', '?')}, {machine.get('CPU(s)', '?')} CPUs"
        f" ({machine.get('Hypervisor vendor', 'bare metal')} guest), flags: "
        f"{' '.join(machine.get('flags', []))}")
    out(f"oneDNN {raw['onednn_context'].get('onednn_version', '?')}, isa "
        f"{raw['onednn_context'].get('onednn_isa', '?')}; dnnx "
        f"{raw['dnnx_context'].get('dnnx_version', '?')} on "
        f"{raw['dnnx_context'].get('dnnx_backend', '?')}; PyTorch {raw['pytorch_info']['torch']}"
        f" (mkldnn {raw['pytorch_info']['mkldnn']}, {raw['pytorch_info']['torch_threads']} "
        f"threads); OMP_NUM_THREADS={args['threads']}; batch {batch}; "
        f"{'interleaved case by case' if args.get('interleave', True) else 'tool by tool'}, "
        f"{args.get('rounds', 1)} round(s)")
    out(f"Load average (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in raw['load_before'])}"
        f", after: {' '.join(f'{x:.2f}' for x in raw['load_after'])}; whole run "
        f"{raw['wall_s']:.0f} s ({time.strftime('%Y-%m-%d %H:%M', time.gmtime(raw['started']))}"
        f" UTC)")
    p0, p1 = raw["peak"], raw["peak_after"]
    shared = ""
    if min(p0["fp32_gflops_all_threads"], p1["fp32_gflops_all_threads"]) < 0.9 * peak:
        shared = f" (below the peak: the host was not giving the vCPUs {p0['threads']} full cores)"
    out(f"Peak (peak_fma): fp32 FMA {p0['fp32_gflops_one_thread']:.1f} GFLOP/s per thread "
        f"({p0['implied_ghz_at_2_fma_units']:.2f} GHz x 2 FMA units x 16 lanes x 2 flops), "
        f"x {p0['threads']} = **{peak:.1f} GFLOP/s**; all {p0['threads']} threads at once: "
        f"{p0['fp32_gflops_all_threads']:.1f} before, {p1['fp32_gflops_all_threads']:.1f} after the "
        f"run{shared}. "
        f"bf16 dot product (vdpbf16ps): {p0['bf16_gflops_one_thread']:.1f} GFLOP/s per thread.")
    out("")
    out("oneDNN best = the fastest implementation with plain (NCHW) tensors, in oneDNN's own "
        "blocked layouts or channels-last, reorders not counted (a framework keeping its tensors "
        "in those layouts avoids them). oneDNN user-layout = the fastest way to take and return "
        "NCHW tensors: plain, or blocked or channels-last with the reorders timed in every call; "
        "dnnx takes and returns NCHW tensors, so this is its fair yardstick. Times: median of the "
        "repetitions, ms. % peak: against the fp32 FMA peak above, for both dtypes.")
    out("")
    out("| layer | shape | dtype | dir | PyTorch ms | oneDNN best ms | oneDNN user-layout ms "
        "| dnnx ms | dnnx/oneDNN best | dnnx/oneDNN user-layout | dnnx/PyTorch | dnnx GFLOPS "
        "| dnnx % peak |")
    out("|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    totals = {}
    impl_rows = []
    errors = []
    marked = []
    for dtype in args["dtypes"]:
        total = {"complete": True, "flops": 0.0, "rows_3x3": [], "ratios_best": [],
                 "ratios_user": []}
        for key in ("pytorch", "best", "user", "dnnx"):
            total[key] = total[key + "_min"] = 0.0
        for shape in shapes:
            for direction in DIRECTIONS:
                name = case_name(shape, direction, dtype)
                torch_row = raw["pytorch"].get(name, {})
                setups = {setup: raw["onednn"].get(f"{name}/{setup}", {})
                          for setup in ONEDNN_SETUPS}
                dnnx = raw["dnnx"].get(name, {})
                for tool, row in [("PyTorch", torch_row), ("dnnx", dnnx)] + [
                        (f"oneDNN {setup}", row) for setup, row in setups.items()]:
                    if "error" in row:
                        errors.append(f"{name} {tool}: {row['error']}")
                # Older result files have no nhwc set-ups; fastest() skips what is missing.
                best = fastest(**{k: setups[k] for k in ("plain", "any", "nhwc")})
                user = fastest(**{k: setups[k] for k in ("plain", "reorders", "nhwc_reorders")})
                rows = {"pytorch": torch_row, "best": best, "user": user, "dnnx": dnnx}
                t = {key: row.get("ms") for key, row in rows.items()}
                flops = 2.0 * macs(shape, batch)
                gflops = flops / (t["dnnx"] * 1e-3) * 1e-9 if t["dnnx"] else None
                capacity = raw.get("capacity", {}).get(name)
                disturbed = capacity is not None and capacity < DISTURBED * peak
                if disturbed:
                    marked.append((name, capacity))
                out(f"| {shape['name']}{' ‡' if disturbed else ''} | {describe(shape, batch)} | "
                    f"{dtype} | {direction} | "
                    f"{fmt(t['pytorch'])} | {fmt(t['best'])} | {fmt(t['user'])} | "
                    f"{fmt(t['dnnx'])} | {fmt(ratio(t['dnnx'], t['best']))} | "
                    f"{fmt(ratio(t['dnnx'], t['user']))} | {fmt(ratio(t['dnnx'], t['pytorch']))} "
                    f"| {fmt(gflops, 1)} | {fmt(100 * gflops / peak if gflops else None, 0, '%')} |")
                impl_rows.append((name, dnnx.get("label", "n/a"), best.get("impl", "n/a"),
                                  user.get("impl", "n/a")))
                for key, row in rows.items():
                    if "ms" not in row:
                        total["complete"] = False
                        continue
                    total[key] += row["ms"]
                    total[key + "_min"] += row.get("min_ms", row["ms"])
                total["flops"] += flops
                for key in ("best", "user"):
                    if t[key] and t["dnnx"]:
                        total["ratios_" + key].append((name, t["dnnx"] / t[key]))
                if shape["kh"] == 3 and shape["kw"] == 3:
                    total["rows_3x3"].append((name, gflops))
        totals[dtype] = total
        gflops = total["flops"] / (total["dnnx"] * 1e-3) * 1e-9 if total["dnnx"] else None
        out(f"| **total** | {len(shapes)} shapes x 3 | {dtype} | all | {total['pytorch']:.1f} | "
            f"{total['best']:.1f} | {total['user']:.1f} | {total['dnnx']:.1f} | "
            f"{fmt(ratio(total['dnnx'], total['best']))} | "
            f"{fmt(ratio(total['dnnx'], total['user']))} | "
            f"{fmt(ratio(total['dnnx'], total['pytorch']))} | {fmt(gflops, 1)} | "
            f"{fmt(100 * gflops / peak if gflops else None, 0, '%')} |")
    if raw.get("retried"):
        out("")
        out(f"{len(raw['retried'])} cases ran on a disturbed machine (below {DISTURBED:.0%} of the "
            f"peak) and were timed again, all three tools, keeping the attempt on the fuller "
            f"machine: {', '.join(sorted(raw['retried']))}.")
    if marked:
        out("")
        out(f"‡ {len(marked)} of {len(raw['capacity'])} cases ran while the host gave the vCPUs "
            f"less than {DISTURBED:.0%} of the peak (fp32 FMA probe, all threads at once, just "
            f"before and after the case: {', '.join(f'{n} {c:.0f}' for n, c in marked)} "
            f"GFLOP/s); their times are inflated.")
    out("")
    out("Totals of the fastest repetitions instead of the medians (the spread shows how much the "
        "machine's neighbours disturbed the run):")
    out("")
    for dtype in args["dtypes"]:
        total = totals[dtype]
        out(f"- {dtype}: PyTorch {total['pytorch_min']:.1f} ms, oneDNN best "
            f"{total['best_min']:.1f} ms, oneDNN user-layout {total['user_min']:.1f} ms, dnnx "
            f"{total['dnnx_min']:.1f} ms; dnnx/oneDNN user-layout "
            f"{fmt(ratio(total['dnnx_min'], total['user_min']))}, dnnx/oneDNN best "
            f"{fmt(ratio(total['dnnx_min'], total['best_min']))}, dnnx/PyTorch "
            f"{fmt(ratio(total['dnnx_min'], total['pytorch_min']))}")
    if len(raw.get("rounds", [])) > 1:
        out("")
        out("Each round on its own (the table above takes every case's median over the rounds; a "
            "round whose cases were retried ran on a disturbed machine):")
        out("")
        out("| round | dtype | dnnx/oneDNN user-layout | cases within 5% | dnnx/PyTorch "
            "| 3x3 >= 70% of peak | cases retried |")
        out("|---|---|--:|--:|--:|--:|--:|")
        for index, measured in enumerate(raw["rounds"]):
            for dtype in args["dtypes"]:
                r = round_summary(measured, shapes, dtype, batch, peak)
                if r is None:
                    continue
                out(f"| {index + 1} | {dtype} | {r['user']:.3f} | {r['within']}/{r['cases']} | "
                    f"{r['pytorch']:.3f} | {r['good_3x3']}/{r['cases_3x3']} | "
                    f"{len(measured.get('retried', {}))} |")
    out("")
    out("Implementations that ran (dnnx: its exhaustive choice; oneDNN: the sweep's winner, with "
        "the layouts of the direction's two inputs and its output):")
    out("")
    out("| case | dnnx | oneDNN best | oneDNN user-layout |")
    out("|---|---|---|---|")
    for name, dnnx_impl, best_impl, user_impl in impl_rows:
        out(f"| {name} | `{dnnx_impl}` | {best_impl} | {user_impl} |")
    out("")
    out("Targets:")
    out("")
    for dtype in args["dtypes"]:
        total = totals[dtype]
        if not total["complete"]:
            out(f"- {dtype}: some cases have no time (see the errors); the totals are partial")
        for label, key in (("raw oneDNN user-layout", "user"), ("raw oneDNN best", "best")):
            r = ratio(total["dnnx"], total[key])
            over = [f"{n} {x:.2f}" for n, x in total["ratios_" + key] if x > TARGET_OVERHEAD]
            count = len(total["ratios_" + key])
            out(f"- {dtype}, dnnx adds <= 5% over {label}: total {fmt(r, 3)} -> "
                f"{'met' if r is not None and r <= TARGET_OVERHEAD else 'NOT met'}; "
                f"{count - len(over)}/{count} cases within 5%"
                + (f"; over: {', '.join(over)}" if over else ""))
        r = ratio(total["dnnx"], total["pytorch"])
        out(f"- {dtype}, dnnx total <= 0.85 x PyTorch's: {fmt(r, 3)} -> "
            f"{'met' if r is not None and r <= TARGET_VS_PYTORCH else 'NOT met'}")
        rows = total["rows_3x3"]
        low = [f"{n} {100 * g / peak:.0f}%" if g else f"{n} n/a" for n, g in rows
               if g is None or g < TARGET_3X3_PEAK * peak]
        # The 3x3 target is set against the fp32 peak; bf16 is reported against it too.
        goal = "" if dtype == "f32" else " (reported; the target is for f32)"
        out(f"- {dtype}, 3x3 layers >= 70% of the fp32 peak ({peak:.1f} GFLOP/s){goal}: "
            f"{len(rows) - len(low)}/{len(rows)} cases"
            + (f"; below: {', '.join(low)}" if low else ""))
    if errors:
        out("")
        out("Errors:")
        for error in errors:
            out(f"- {error}")
    return "\n".join(lines)


def main():
    global VERBOSE
    args = parse_args()
    VERBOSE = args.verbose
    if args.from_json:
        with open(args.from_json) as source:
            raw = json.load(source)
    else:
        raw = run_everything(args)
        if args.json_out:
            with open(args.json_out, "w") as sink:
                json.dump(raw, sink, indent=1)
    print(render(raw))


if __name__ == "__main__":
    main()
