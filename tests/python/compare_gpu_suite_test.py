#!/usr/bin/env python3
"""bench/compare_gpu.py without a GPU: every shapes file of the suite parses (Note [shapes file
lines]), its layers' output sizes are positive, bad fields are errors naming the line, the
--dry-run listing runs, --rounds combines rounds into medians (Note [suite rounds]), a suite
stopped during a round keeps the rounds it finished in its --json file, and each choice's kind
is read from its id. No torch,
no benchmark binary."""

import argparse
import contextlib
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_checks import ROOT, check, failures, finish  # noqa: E402
import compare_gpu  # noqa: E402


shapes_dir = os.path.join(ROOT, "bench", "shapes")
files = sorted(f for f in os.listdir(shapes_dir) if f.endswith(".txt"))
check(len(files) >= 9, f"suite files: {files}")
for name in files:
    layers, batch = compare_gpu.read_shapes_file(os.path.join(shapes_dir, name), "all")
    check(layers, f"{name}: no layers")
    check(name == "resnet50.txt" or (batch or 0) >= 1, f"{name}: no batch=N line")
    for s in layers:
        check(min(compare_gpu.output_size(s)) >= 1, f"{name} {s['name']}: empty output")
resnet = compare_gpu.read_shapes(os.path.join(shapes_dir, "resnet50.txt"), "bench")
check(len(resnet) == 8, f"resnet50 bench layers: {len(resnet)}")
mobilenet, batch = compare_gpu.read_shapes_file(os.path.join(shapes_dir, "mobilenetv2.txt"), "dw")
check(batch == 128, f"mobilenetv2 batch {batch}")
first = next(s for s in mobilenet if s["name"] == "b2.dw.s2")
check(first["groups"] == 96 and compare_gpu.output_size(first) == [56, 56],
      f"b2.dw.s2: {first}")
video, _ = compare_gpu.read_shapes_file(os.path.join(shapes_dir, "r2plus1d_18.txt"), "all")
check(video[0]["stride"] == [1, 2, 2] and compare_gpu.output_size(video[0]) == [16, 56, 56],
      f"r2plus1d stem: {video[0]}")

bad = {
    "x 8x9x9 8x1x3x3 1 1 1 groups=4\n": "groups=4 disagrees",
    "x 8x9x9 8x1x3x3 1 1 1 colour=red\n": "unknown option 'colour=red'",
    "x 8x9x9 8x1x3x3 1,1,1 1 1\n": "needs 1 or 2 entries",
    "batch=zero\n": "bad directive",
    "x 8x9x9 8x1x3x3 1 1\n": "expected 'name src weights",
    "x 8x9x9 8x1x3x3 1 1 1 dilation=9\n": "does not fit",
}
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "bad.txt")
    for text, expected in bad.items():
        with open(path, "w") as f:
            f.write("# a comment\n" + text)
        try:
            compare_gpu.read_shapes_file(path, "all")
            failures.append(f"accepted: {text!r}")
        except compare_gpu.ShapesError as error:
            check(expected in str(error) and ":2:" in str(error), f"{text!r} -> {error}")

out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare_gpu.py"), "--suite",
                      "--files", "mobilenetv2,r2plus1d_18", "--max-layers", "3", "--dry-run"],
                     capture_output=True, text=True)
check(out.returncode == 0, f"dry run failed: {out.stderr}")
check("## mobilenetv2.txt: 3 layers at batch 128" in out.stdout, out.stdout)
check("128x96x112x112" not in out.stdout, "max-layers not applied")
check("24x3x16x112x112 * 45x3x1x7x7 s1,2,2 p0,3,3" in out.stdout, out.stdout)
out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare_gpu.py"), "--files",
                      "nonesuch", "--dry-run"], capture_output=True, text=True)
check(out.returncode != 0 and "no shapes file 'nonesuch'" in out.stderr, out.stderr)

# --rounds: the medians of either side per case, every choice, first-round-only cases kept.
def case(name, kernel_ms, algo, search):
    return dict(kind="case", case=name, kernel_ms=kernel_ms, call_ms=kernel_ms + 0.01,
                search_s=search, heuristic_kernel_ms=2 * kernel_ms, algo=algo)


dnnx_rounds = [
    [dict(kind="device", fingerprint="gpu"), case("a/fwd/f16_nhwc", 1.0, "x", 0.5),
     case("b/fwd/f16_nhwc", 3.0, "y", 2.0)],
    [dict(kind="device", fingerprint="other"), case("a/fwd/f16_nhwc", 1.3, "z", 0.7)],
    [case("a/fwd/f16_nhwc", 1.1, "x", 0.6)],
]
torch_rounds = [{"a/fwd/f16_nhwc": dict(kernel_ms=2.0, call_ms=2.1, first_call_ms=500.0)},
                {"a/fwd/f16_nhwc": dict(kernel_ms=1.0, call_ms=1.1, first_call_ms=1.0)},
                {"a/fwd/f16_nhwc": dict(kernel_ms=1.5, call_ms=1.6, first_call_ms=1.0)}]
records, torch_results = compare_gpu.combine_rounds(dnnx_rounds, torch_rounds)
by_case = {r["case"]: r for r in records if r["kind"] == "case"}
a = by_case.get("a/fwd/f16_nhwc", {})
check(a.get("kernel_ms") == 1.1 and a.get("search_s") == 0.6 and a.get("algos") == ["x", "z"]
      and len(a.get("rounds", [])) == 3, f"combined a: {a}")
check(by_case.get("b/fwd/f16_nhwc", {}).get("kernel_ms") == 3.0, f"combined b: {by_case}")
check([r["fingerprint"] for r in records if r["kind"] == "device"] == ["gpu"], f"{records}")
t = torch_results.get("a/fwd/f16_nhwc", {})
check(t.get("kernel_ms") == 1.5 and t.get("first_call_ms") == 500.0 and t.get("rounds") ==
      [2.0, 1.0, 1.5], f"combined torch: {t}")
check(compare_gpu.choices(a) == "`x` / `z`", compare_gpu.choices(a))
single = compare_gpu.combine_rounds(dnnx_rounds[:1], torch_rounds[:1])
check(single == (dnnx_rounds[0], torch_rounds[0]), "one round is returned as it is")
# --reuse-choices: the first round's search time; a later process's first call less its kernel.
def reused(name, kernel_ms, first_call_ms, from_file):
    r = case(name, kernel_ms, "x", 0.0)
    r.update(first_call_ms=first_call_ms, from_file=from_file)
    return r


reuse_rounds = [[case("a/fwd/f16_nhwc", 1.0, "x", 0.8), case("b/fwd/f16_nhwc", 2.0, "x", 1.6)],
                [reused("a/fwd/f16_nhwc", 1.2, 31.2, True), reused("b/fwd/f16_nhwc", 2.0, 902.0,
                                                                   False)],
                [reused("a/fwd/f16_nhwc", 0.8, 10.8, True), reused("b/fwd/f16_nhwc", 2.0, 4.0,
                                                                   True)]]
records, _ = compare_gpu.combine_rounds(reuse_rounds, torch_rounds, reuse=True)
by_case = {r["case"]: r for r in records if r["kind"] == "case"}
a, b = by_case["a/fwd/f16_nhwc"], by_case["b/fwd/f16_nhwc"]
# The second process (round 2) apart from those after it: it settles the late plans.
check(a["search_s"] == 0.8 and a["reuse_ms"] == 30.0 and a["reuse_after_ms"] == 10.0
      and a["reuse_from_file"] is True and a["kernel_ms"] == 1.0, f"reused a: {a}")
check(b["search_s"] == 1.6 and b["reuse_ms"] == 900.0 and b["reuse_after_ms"] == 2.0
      and b["reuse_from_file"] is False, f"reused b: {b}")
check([one.get("first_call_ms") for one in b["rounds"]] == [None, 902.0, 4.0],
      f"rounds of b: {b['rounds']}")
two = compare_gpu.combine_rounds(reuse_rounds[:2], torch_rounds[:2], reuse=True)[0]
check("reuse_after_ms" not in {r["case"]: r for r in two if r["kind"] == "case"}["a/fwd/f16_nhwc"],
      "two rounds: no process after the second")
for one in reuse_rounds[1] + reuse_rounds[2]:
    del one["heuristic_kernel_ms"]  # later rounds do not time the heuristic pick
records, _ = compare_gpu.combine_rounds(reuse_rounds, torch_rounds, reuse=True)
a = {r["case"]: r for r in records if r["kind"] == "case"}["a/fwd/f16_nhwc"]
check(a["heuristic_kernel_ms"] == 2.0 and compare_gpu.speedup(a) == "2.00", f"heuristic: {a}")
check(compare_gpu.speedup({"kernel_ms": 1.0}) == "-", "no heuristic time")
summary = compare_gpu.reuse_summary([(20.0, 4.0, 0.8, True, "a fwd", 0),
                                     (451.0, 2.0, 1.6, False, "b fwd", 3)])
check(summary["reuse_worst_row"] == "b fwd" and summary["reuse_answered"] == 1
      and abs(summary["reuse_share"] - 0.471 / 2.4) < 1e-9
      and abs(summary["reuse_after_share"] - 0.006 / 2.4) < 1e-9
      and summary["reuse_median_ms"] == 235.5, f"reuse summary: {summary}")
# The cost per late plan: the rows that had late plans, over their count.
check(summary["reuse_late_plans"] == 3
      and abs(summary["reuse_ms_per_late_plan"] - 451.0 / 3) < 1e-9, f"late plans: {summary}")
summary = compare_gpu.reuse_summary([(20.0, None, 0.8, True, "a fwd", 0),
                                     (451.0, 2.0, 1.6, False, "b fwd", 0)])
check("reuse_after_share" not in summary, f"a row without a third process: {summary}")
check(summary["reuse_late_plans"] == 0 and "reuse_ms_per_late_plan" not in summary,
      f"no late plans: {summary}")
# Late plans recorded per round (the benchmark's `late_plans`): the second process settled 3 of
# the first round's 4, the third the last; those the last round left sum over the rows.
for one, late in zip([r[0] for r in reuse_rounds], (4, 2, 0)):
    one["late_plans"] = late
for one, late in zip([r[1] for r in reuse_rounds], (0, 0, 0)):
    one["late_plans"] = late
reuse_rounds[1][0]["late_plans"], reuse_rounds[2][0]["late_plans"] = 1, 0
records, _ = compare_gpu.combine_rounds(reuse_rounds, torch_rounds, reuse=True)
a = {r["case"]: r for r in records if r["kind"] == "case"}["a/fwd/f16_nhwc"]
check(a["late_settled"] == 3 and a["late_left"] == 0
      and [one["late_plans"] for one in a["rounds"]] == [4, 1, 0], f"late plans of a: {a}")
summary = compare_gpu.reuse_summary([(20.0, 4.0, 0.8, True, "a fwd", 3, 1),
                                     (451.0, 2.0, 1.6, False, "b fwd", 0, 0)])
check(summary["reuse_late_plans"] == 3 and summary["reuse_late_left"] == 1
      and abs(summary["reuse_ms_per_late_plan"] - 20.0 / 3) < 1e-9, f"late left: {summary}")
# The first round's next step (the benchmark's `next_step` records) settled 2 of a's 4 late
# plans and changed its choice: the second process's count starts from the 2 it left.
reuse_rounds[0].append(dict(kind="next_step", case="a/fwd/f16_nhwc", ms=35.0, algo="w",
                            late_plans=2))
records, _ = compare_gpu.combine_rounds(reuse_rounds, torch_rounds, reuse=True)
a = {r["case"]: r for r in records if r["kind"] == "case"}["a/fwd/f16_nhwc"]
check(a["next_step_ms"] == 35.0 and a["next_step_algo"] == "w" and a["next_step_late"] == 2
      and a["late_settled"] == 1 and a["late_left"] == 0, f"next step of a: {a}")
check("next_step_ms" not in {r["case"]: r for r in records if r["kind"] == "case"}[
      "b/fwd/f16_nhwc"], "b had no next step")
# A next step that failed leaves the search's choice and says why.
reuse_rounds[0].append(dict(kind="next_step", case="b/fwd/f16_nhwc", ms=3.0, error="out of memory"))
records, _ = compare_gpu.combine_rounds(reuse_rounds, torch_rounds, reuse=True)
b = {r["case"]: r for r in records if r["kind"] == "case"}["b/fwd/f16_nhwc"]
check(b.get("next_step_error") == "out of memory" and "next_step_ms" not in b, f"failed step: {b}")
# Per config: the rows whose search skipped plans (late plans) and those whose choice changed
# between rounds.
def row(name, **fields):
    return dict(kind="case", case=name, kernel_ms=1.0, call_ms=1.1, search_s=1.0, algo="x",
                **fields)


late_records = [row("a/fwd/f16_nhwc", plans_skipped=2, algos=["x", "y"], late_plans=3,
                    next_step_ms=40.0, next_step_algo="y", next_step_late=1),
                row("a/bwd_data/f16_nhwc", plans_skipped=0, algos=["x", "x2"], late_plans=0,
                    next_step_ms=20.0, next_step_algo="x", next_step_late=0),
                row("a/bwd_weights/f16_nhwc", next_step_error="out of memory")]
late_torch = {r["case"]: dict(kernel_ms=2.0, call_ms=2.1, first_call_ms=50.0)
              for r in late_records}
with contextlib.redirect_stdout(io.StringIO()) as printed:
    late_summary = compare_gpu.print_tables(argparse.Namespace(configs=["f16_nhwc"]),
                                            [dict(name="a")], late_records, late_torch, 8)
late_summary = late_summary["f16_nhwc"]
check(late_summary["rows_skipping_plans"] == 1 and late_summary["choices_changed"] == 2
      and late_summary["rows"] == 3
      and "skipped plans (kept as late plans): 1 of 3 rows" in printed.getvalue(),
      f"late plans summary: {late_summary}")
check(abs(late_summary["next_step_total_s"] - 0.06) < 1e-12
      and abs(late_summary["next_step_share"] - 0.02) < 1e-12
      and late_summary["next_step_late_plans"] == 2 and late_summary["next_step_switched"] == 1
      and late_summary["search_with_next_step_median_s"] == 1.03
      and late_summary["search_with_next_step_worst_s"] == 1.04
      and "next step" in printed.getvalue(), f"next step summary: {late_summary}")
check(late_summary["next_step_failed"] == 1
      and "a bwd_weights: out of memory" in printed.getvalue(), f"failed step: {late_summary}")
# A suite stopped from outside during a round keeps the rounds it finished in its --json file.
def fake_dnnx(args, shapes_path=None, **_):
    return [dict(kind="device", fingerprint="gpu"), case("b2.dw.s2/fwd/f16_nhwc", 1.0, "x", 0.5)]


torch_turns = []
kernel_turns = []  # Note [PyTorch's kernels]: asked for in the first round only


def fake_torch(args, shapes, batch, wanted=None, kernels=None):
    torch_turns.append(sorted(wanted))
    kernel_turns.append(kernels)
    if len(torch_turns) == 2:
        raise KeyboardInterrupt  # the second round's PyTorch turn never ends
    return ({"b2.dw.s2/fwd/f16_nhwc": dict(kernel_ms=2.0, call_ms=2.1, first_call_ms=9.0)},
            dict(gpu="gpu", torch="2", cudnn="9"))


def suite_args(json_path, **more):
    """run_suite's arguments: MobileNetV2's file in f16, three rounds, the choices kept."""
    return argparse.Namespace(
        files="mobilenetv2", tag="all", max_layers=0, batch=None, dry_run=False, budget_s=0,
        reuse_choices=True, rounds=3, json=json_path, configs=["f16_nhwc"], **more)


saved = compare_gpu.run_dnnx, compare_gpu.run_torch
compare_gpu.run_dnnx, compare_gpu.run_torch = fake_dnnx, fake_torch
with tempfile.TemporaryDirectory() as folder:
    json_path = os.path.join(folder, "suite.json")
    args = suite_args(json_path, torch_kernels=True)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            compare_gpu.run_suite(args)
        failures.append("the stopped suite returned")
    except KeyboardInterrupt:
        pass
    with open(json_path) as f:
        kept = json.load(f)
    check(len(kept) == 1 and kept[0]["rounds"] == 1 and kept[0]["file"] == "mobilenetv2.txt"
          and kept[0]["summary"]["f16_nhwc"]["ratio"] == 0.5
          and kept[0]["summary"]["f16_nhwc"]["choice_kinds"] == {"x": 1}
          and os.listdir(folder) == ["suite.json"], f"kept after a stop: {kept}")
compare_gpu.run_dnnx, compare_gpu.run_torch = saved
check(torch_turns == [["b2.dw.s2/fwd/f16_nhwc"]] * 2, f"torch turns: {torch_turns}")
check(kernel_turns == [True, False], f"kernels asked for: {kernel_turns}")

# Note [gated PyTorch loops]: a fake stream whose host queues a call in host_ms and whose GPU runs
# it in kernel_ms. Behind a sleep that outlasts the queuing the loop reads the kernel alone; a
# sleep too short is doubled, and after three tries the sample says it was not gated.
class FakeCuda:
    def __init__(self, host_ms, kernel_ms, cycles_per_ms=1000.0):
        self.host_ms, self.kernel_ms, self.cycles_per_ms = host_ms, kernel_ms, cycles_per_ms
        self.sleeps, self.queued = [], 0

    def _sleep(self, cycles):
        self.sleeps.append(cycles / self.cycles_per_ms)
        self.queued = 0

    def call(self):
        self.queued += 1

    def Event(self, enable_timing=False):
        cuda = self

        class FakeEvent:
            def record(self):
                pass

            def query(self):  # the GPU passed the start: the sleep ended before the queuing did
                return cuda.sleeps[-1] < cuda.queued * cuda.host_ms

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                gpu = cuda.queued * cuda.kernel_ms
                host = cuda.queued * cuda.host_ms - cuda.sleeps[-1]  # queued after the sleep
                return max(gpu, host)

        return FakeEvent()


fake = FakeCuda(host_ms=0.04, kernel_ms=0.02)
ms, gated = compare_gpu.gated_loop_ms(fake, fake.call, 50, host_ms=2.0, cycles_per_ms=1000.0)
check(gated and abs(ms - 0.02) < 1e-12 and fake.sleeps == [3.2], f"gated: {ms} {gated} {fake.sleeps}")
fake = FakeCuda(host_ms=0.04, kernel_ms=0.02)
ms, gated = compare_gpu.gated_loop_ms(fake, fake.call, 50, host_ms=0.5, cycles_per_ms=1000.0)
check(gated and abs(ms - 0.02) < 1e-12 and [round(x, 6) for x in fake.sleeps] == [0.95, 1.9, 3.8],
      f"doubled: {ms} {gated} {fake.sleeps}")
fake = FakeCuda(host_ms=0.04, kernel_ms=0.01)
ms, gated = compare_gpu.gated_loop_ms(fake, fake.call, 50, host_ms=0.1, cycles_per_ms=1000.0)
check(not gated and ms > 0.01 and len(fake.sleeps) == 3, f"not gated: {ms} {gated} {fake.sleeps}")
# A PyTorch without cuda._sleep: no calibration, loops timed ungated and marked so.
check(compare_gpu.sleep_cycles_per_ms(object()) is None, "a cuda module without _sleep")
fake = FakeCuda(host_ms=0.04, kernel_ms=0.02)
fake.sleeps.append(0.0)  # the fake's clock: nothing held the stream
ms, gated = compare_gpu.gated_loop_ms(fake, fake.call, 50, host_ms=2.0, cycles_per_ms=None)
check(not gated and abs(ms - 0.04) < 1e-12 and fake.sleeps == [0.0], f"no sleep: {ms} {gated}")
# PyTorch rows not gated in some round are named, and their count is in the summary.
ungated_records = [row("a/fwd/f16_nhwc"), row("a/bwd_data/f16_nhwc"), row("a/bwd_weights/f16_nhwc")]
ungated_torch = {r["case"]: dict(kernel_ms=2.0, call_ms=2.1, first_call_ms=50.0, gated=True)
                 for r in ungated_records}
ungated_torch["a/bwd_data/f16_nhwc"]["gated"] = False
for t in ungated_torch.values():
    t["ungated_ms"] = 4.0
with contextlib.redirect_stdout(io.StringIO()) as printed:
    ungated_summary = compare_gpu.print_tables(argparse.Namespace(configs=["f16_nhwc"]),
                                               [dict(name="a")], ungated_records, ungated_torch,
                                               8)["f16_nhwc"]
check(ungated_summary.get("torch_ungated_rows") == 1 and "a bwd_data" in printed.getvalue(),
      f"ungated rows: {ungated_summary}")
check(ungated_summary["torch_ungated_ms"] == 12.0 and ungated_summary["ratio_ungated"] == 0.25
      and "dnnx/that 0.25" in printed.getvalue(), f"as called: {ungated_summary}")
two_rounds = compare_gpu.combine_rounds(
    [[case("a/fwd/f16_nhwc", 1.0, "x", 0.5)], [case("a/fwd/f16_nhwc", 1.0, "x", 0.5)]],
    [{"a/fwd/f16_nhwc": dict(kernel_ms=1.0, call_ms=1.1, first_call_ms=9.0, gated=True,
                             host_ms=0.03, ungated_ms=1.2)},
     {"a/fwd/f16_nhwc": dict(kernel_ms=1.0, call_ms=1.1, first_call_ms=9.0, gated=False,
                             host_ms=0.05, ungated_ms=1.4)}])[1]
check(two_rounds["a/fwd/f16_nhwc"]["gated"] is False
      and abs(two_rounds["a/fwd/f16_nhwc"]["host_ms"] - 0.04) < 1e-12
      and abs(two_rounds["a/fwd/f16_nhwc"]["ungated_ms"] - 1.3) < 1e-12,
      f"gated over rounds: {two_rounds}")

# Note [PyTorch's kernels]: the profiler's GPU events per call, the longest first (host events
# left out); the rows at 0.98 or above list them, and the first round's list is kept.
class FakeRange:
    def __init__(self, us):
        self.us = us

    def elapsed_us(self):
        return self.us


class FakeEvent:
    def __init__(self, name, device, us):
        self.name, self.device_type, self.time_range = name, device, FakeRange(us)


events = [FakeEvent("aten::convolution_backward", "DeviceType.CPU", 80.0)]
for _ in range(4):
    events += [FakeEvent("reduce_splitk", "DeviceType.CUDA", 1.0),
               FakeEvent("sm90_wgrad_f16f16_f16", "DeviceType.CUDA", 10.0)]
kernels = compare_gpu.kernel_summary(events, 4)
check(kernels == [dict(name="sm90_wgrad_f16f16_f16", launches=1.0, us=10.0),
                  dict(name="reduce_splitk", launches=1.0, us=1.0)], f"kernels: {kernels}")
kernel_records = [row("a/fwd/f16_nhwc"), row("a/bwd_data/f16_nhwc"), row("a/bwd_weights/f16_nhwc")]
kernel_torch = {r["case"]: dict(kernel_ms=2.0, call_ms=2.1, first_call_ms=50.0,
                                kernels=[dict(name="far", launches=1.0, us=2000.0)])
                for r in kernel_records}
kernel_torch["a/bwd_weights/f16_nhwc"].update(kernel_ms=0.9, kernels=kernels)
with contextlib.redirect_stdout(io.StringIO()) as printed:
    compare_gpu.print_tables(argparse.Namespace(configs=["f16_nhwc"]), [dict(name="a")],
                             kernel_records, kernel_torch, 8)
listing = printed.getvalue()
check("- a bwd_weights (1.11): 1 x `sm90_wgrad_f16f16_f16` 10.0; 1 x `reduce_splitk` 1.0" in listing
      and "`far`" not in listing, listing)
kept = compare_gpu.combine_rounds(
    [[case("a/fwd/f16_nhwc", 1.0, "x", 0.5)], [case("a/fwd/f16_nhwc", 1.0, "x", 0.5)]],
    [{"a/fwd/f16_nhwc": dict(kernel_ms=1.0, call_ms=1.1, first_call_ms=9.0, kernels=kernels)},
     {"a/fwd/f16_nhwc": dict(kernel_ms=1.0, call_ms=1.1, first_call_ms=9.0, kernels=[])}])[1]
check(kept["a/fwd/f16_nhwc"]["kernels"] == kernels, f"the first round's kernels: {kept}")

# The kind of each choice, by the prefix of its id.
for algo, kind in (("cudnn:engine:62:workspace=2", "engine"), ("cudnn:gemm:cublaslt:a5", "gemm"),
                   ("cudnn:gemm:packed:cublas:gemm_ex", "gemm packed"),
                   ("cudnn:im2col:packed:cublaslt:a5", "im2col packed"),
                   ("cudnn:im2col:cublaslt:a5", "im2col"), ("cudnn:winograd:cublaslt:a5", "winograd"),
                   ("cudnn:taps:rows:algo_0", "taps"),
                   ("cudnn:frames:winograd_nonfused", "frames"),
                   ("cudnn:fold:planes:cudnn:engine:20", "fold planes"),
                   ("cudnn:fold:frames:cudnn:legacy:fwd:fft:fma", "fold frames"),
                   ("cudnn:kernel:depthwise:unrolled", "depthwise"),
                   ("cudnn:padc:cudnn:engine:5", "padded"),
                   ("cudnn:legacy:fwd:gemm:fma", "legacy"), ("onednn:x64:gemm", "onednn")):
    check(compare_gpu.choice_kind(algo) == kind, f"{algo}: {compare_gpu.choice_kind(algo)}")

# The worst search's split, as the benchmark records it (nothing for a record without it).
split = dict(list_ms=40.0, search_build_ms=3.0, search_full_runs=12, search_full_run_ms=900.0,
             search_probes=30, search_probe_ms=1500.0, search_final_ms=600.0,
             search_costliest="cudnn:engine:19 800 ms, cudnn:taps:rows 300 ms", from_file=False)
parts = compare_gpu.search_parts(split)
check("12 full runs 900 ms" in parts and "30 probes 1500 ms" in parts
      and "final round 600 ms" in parts and "cudnn:engine:19 800 ms" in parts, parts)
rows = [dict(id="cudnn:engine:19", status="abandoned", detail="first run 40 ms (warm) > 2 x best",
             median_ms=40.0, runs=1, workspace=0)]
parts = compare_gpu.search_parts(dict(split, search_costliest_rows=rows))
check("cudnn:engine:19: abandoned (first run 40 ms (warm) > 2 x best)" in parts, parts)
check(compare_gpu.search_parts({"list_ms": 1.0}) == "", "a record without the split")
check(compare_gpu.search_parts(dict(split, from_file=True)) == "", "a choice read from a file")

# --merge: shards in the order given, a gzipped one read as it is, a file in two shards refused.
def shard(name):
    return [dict(file=name, batch=8, summary={"f16_nhwc": dict(
        batch=8, dnnx_ms=1.0, torch_ms=2.0, ratio=0.5, worst_row="a fwd", worst_ratio=0.9,
        search_median_s=0.5, search_worst_s=0.7, search_worst_row="b bwd_data")})]


with tempfile.TemporaryDirectory() as tmp:
    plain, packed = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json.gz")
    with open(plain, "w") as f:
        json.dump(shard("a.txt"), f)
    with gzip.open(packed, "wt") as f:
        json.dump(shard("b.txt"), f)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        merged = compare_gpu.merge_suites([plain, packed], os.path.join(tmp, "all.json"))
    check([r["file"] for r in merged] == ["a.txt", "b.txt"], f"merged {merged}")
    table = printed.getvalue()
    check("| b.txt | f16_nhwc | 8 | 1.000 | 2.000 | 0.50 |" in table, table)
    with open(os.path.join(tmp, "all.json")) as f:
        check(json.load(f) == merged, "the merged --json")
    try:
        compare_gpu.merge_suites([plain, plain])
        check(False, "a file in two shards was merged")
    except compare_gpu.ShapesError as error:
        check("a.txt in more than one shard" in str(error), str(error))
    # --latest: a later run of a.txt, from a member of a .tar.gz archive, takes a.txt's place.
    later = shard("a.txt")
    later[0]["summary"]["f16_nhwc"]["dnnx_ms"] = 0.75
    later_path = os.path.join(tmp, "later.json")
    with open(later_path, "w") as f:
        json.dump(later, f)
    archive = os.path.join(tmp, "runs.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(later_path, arcname="./suite/a.json")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        merged = compare_gpu.merge_suites([plain, packed, archive + ":suite/a.json"], latest=True)
    check([r["file"] for r in merged] == ["a.txt", "b.txt"] and
          merged[0]["summary"]["f16_nhwc"]["dnnx_ms"] == 0.75, f"--latest: {merged}")
    check("| a.txt | f16_nhwc | 8 | 0.750 | 2.000 |" in printed.getvalue(), printed.getvalue())
    for missing in (archive + ":suite/none.json", os.path.join(tmp, "none.tar.gz") + ":a.json"):
        try:
            compare_gpu.merge_suites([missing])
            check(False, f"{missing} was read")
        except compare_gpu.ShapesError as error:
            check("--merge" in str(error), str(error))

# --merge --rows: each file's per-row tables again from its records and PyTorch's rows (the
# layers read from the bench/shapes file it names), before the summary; a file that names no
# shapes file of bench/shapes is an error.
def ran_shard(name, layer):
    dnnx, torch = [dict(kind="device", fingerprint="made up")], {}
    for i, direction in enumerate(compare_gpu.DIRECTIONS):
        key = f"{layer}/{direction}/f16_nhwc"
        dnnx.append(dict(kind="case", case=key, layer=layer, direction=direction,
                         config="f16_nhwc", kernel_ms=0.5 + i, call_ms=0.6 + i, first_call_ms=900.0,
                         search_s=0.9, algo=f"cudnn:engine:{60 + i}:workspace=2"))
        torch[key] = dict(kernel_ms=1.0 + i, call_ms=1.2 + i, first_call_ms=300.0)
    return [dict(file=name, batch=32, rounds=3, dnnx=dnnx, torch=torch,
                 torch_info=dict(gpu="made-up GPU", torch="2.x", cudnn=91900),
                 summary=shard(name)[0]["summary"])]


with tempfile.TemporaryDirectory() as tmp:
    odd = os.path.join(tmp, "odd.json")
    with open(odd, "w") as f:
        json.dump(ran_shard("odd_sizes.txt", "prime.1x1"), f)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        compare_gpu.merge_suites([odd], rows=True)
    text = printed.getvalue()
    check("## odd_sizes.txt: batch 32, 1 layers, 3 round(s)" in text, text)
    check("| prime.1x1 | bwd_data | 1.500 | 2.000 | 0.75 |" in text, text)
    check("`cudnn:engine:62:workspace=2`" in text, text)
    check("prime.3x3" not in text, "a layer the run did not reach:\n" + text)
    check(text.index("### f16_nhwc") < text.index("Suite summary"), text)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        compare_gpu.merge_suites([odd])
    check("| prime.1x1 |" not in printed.getvalue(), "rows printed without --rows")
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump(ran_shard("no_such_file.txt", "x"), f)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            compare_gpu.merge_suites([bad], rows=True)
        check(False, "rows of a file that names no shapes file")
    except compare_gpu.ShapesError as error:
        check("cannot read the layers of no_such_file.txt" in str(error), str(error))

# Note [rows above 1.00 and the rounds' spread]: a row printed above 1.00 is set against each
# side's max / min over its rounds; beyond both (or with one round) it is named as such.
def spread_row(name, dnnx_ms, torch_ms):
    d = row(name, rounds=[dict(kernel_ms=x, algo="x") for x in dnnx_ms])
    d["kernel_ms"] = sorted(dnnx_ms)[len(dnnx_ms) // 2]
    t = dict(kernel_ms=sorted(torch_ms)[len(torch_ms) // 2], call_ms=1.0, first_call_ms=5.0,
             rounds=list(torch_ms))
    return d, t


spread_cases = {"a/fwd/f16_nhwc": ([1.03, 1.04, 1.02], [1.0, 1.01, 0.99]),  # beyond: 1.03 / 1.0
                "a/bwd_data/f16_nhwc": ([1.02, 1.10, 1.00], [1.0, 1.0, 1.0]),  # within dnnx's
                "a/bwd_weights/f16_nhwc": ([1.004], [1.0])}  # prints 1.00: not above
spread_records, spread_torch = [], {}
for name, (dnnx_ms, torch_ms) in spread_cases.items():
    d, t = spread_row(name, dnnx_ms, torch_ms)
    spread_records.append(d)
    spread_torch[name] = t
with contextlib.redirect_stdout(io.StringIO()) as printed:
    spread_summary = compare_gpu.print_tables(argparse.Namespace(configs=["f16_nhwc"]),
                                              [dict(name="a")], spread_records, spread_torch,
                                              8)["f16_nhwc"]
check(spread_summary["rows_above"] == 2
      and spread_summary["rows_above_beyond_spread"] == ["a fwd"]
      and "rows above 1.00: 2, 1 of them beyond" in printed.getvalue()
      and "a fwd 1.030 (dnnx 1.020, torch 1.020)" in printed.getvalue()
      and "within it: a bwd_data 1.020 (dnnx 1.100, torch 1.000)" in printed.getvalue(),
      f"rows above 1.00: {spread_summary}\n{printed.getvalue()}")
# Note [loop against search]: a row's loop over its search's reading of the same choice; rows over
# 1.03 are named, worst first; a changed choice or a search without that row is left out.
def searched(name, loop_ms, search_ms, **fields):
    r = row(name, search_rows=[dict(id="other", median_ms=search_ms / 2, status="ok"),
                               dict(id="x", median_ms=search_ms, status="ok")], **fields)
    r["kernel_ms"] = loop_ms
    return r


against_records = [searched("b/fwd/f32_nchw", 0.468, 0.440),                  # 1.064: named
                   searched("b/bwd_data/f32_nchw", 0.450, 0.448),             # 1.004
                   searched("b/bwd_weights/f32_nchw", 0.5, 0.4, algos=["x", "y"]),  # changed
                   row("c/fwd/f32_nchw")]                                      # no search rows
against_torch = {r["case"]: dict(kernel_ms=1.0, call_ms=1.1, first_call_ms=5.0)
                 for r in against_records}
with contextlib.redirect_stdout(io.StringIO()) as printed:
    against_summary = compare_gpu.print_tables(argparse.Namespace(configs=["f32_nchw"]),
                                               [dict(name="b"), dict(name="c")], against_records,
                                               against_torch, 8)["f32_nchw"]
check(against_summary["loop_over_search"] == ["b fwd"]
      and "median 1.034 over 2 rows; over 1.03: 1: b fwd 1.064 (search 0.4400 ms, loop "
          "0.4680 ms, `x`)" in printed.getvalue(),
      f"loop against search: {against_summary}\n{printed.getvalue()}")
check(compare_gpu.loop_against_search(row("d", search_rows=[dict(id="x", median_ms=0.5,
                                                                  status="failed")])) is None,
      "a failed search row is no reading")
check(compare_gpu.above_one(1.02, (None, 1.05)) == (True, True), "one side's spread only")
check(compare_gpu.above_one(0.99, (1.5, 1.5)) == (False, False), "below 1.00")
check(compare_gpu.rounds_spread({"rounds": [dict(kernel_ms=2.0)]}, {"rounds": [1.0, 2.0]})
      == (None, 2.0), "one dnnx round")
with tempfile.TemporaryDirectory() as tmp:
    counted = ran_shard("odd_sizes.txt", "prime.1x1")
    for r in counted[0]["dnnx"]:
        if r.get("kind") == "case":
            r["kernel_ms"] *= 3  # every row above 1.00, no rounds recorded: beyond
    path = os.path.join(tmp, "counted.json")
    with open(path, "w") as f:
        json.dump(counted, f)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        merged = compare_gpu.merge_suites([path])
    check(merged[0]["summary"]["f16_nhwc"]["rows_above"] == 3
          and "| 3 (3) |" in printed.getvalue(),
          f"the count from a merged file's rows: {printed.getvalue()}")

# Note [rows above 1.00 in one process]: the fp16 table's raw files with the archive of their rows
# timed in one process, then a made-up --json of the script's own form.
results_dir = os.path.join(ROOT, "bench", "results")
raw = [os.path.join(results_dir, f) for f in ("gpu-shapes-f16-gated-h200.json.gz",
                                              "gpu-shapes-deeplabv3-f16-gated-h200.json.gz")]
with contextlib.redirect_stdout(io.StringIO()) as printed:
    merged = compare_gpu.merge_suites(
        raw, interleaved=[os.path.join(results_dir, "gpu-interleaved-rows-h200.tar.gz")])
figures = {r["file"]: r["summary"]["f16_nhwc"] for r in merged}
checked = sum(m.get("rows_above_checked", 0) for m in figures.values())
still = [row for m in figures.values() for row in m.get("rows_above_one_process", [])]
check(checked == sum(m["rows_above"] for m in figures.values()) == 30,
      f"every row above 1.00 checked: {checked}")
check(still == ["conv3b bwd_data (1.020)"] and
      "4 (1); in one process 1 of 4 checked: conv3b bwd_data (1.020)" in printed.getvalue(),
      f"in one process: {still}\n{printed.getvalue()}")
with tempfile.TemporaryDirectory() as tmp:
    mine = os.path.join(tmp, "rows.json")
    with open(mine, "w") as f:  # two timings of one row: their median decides
        json.dump(dict(files=[dict(file="c3d.txt", rows=[
            dict(layer="conv3b", direction="bwd_data", config="f16_nhwc", ratio=0.98),
            dict(layer="conv3b", direction="bwd_data", config="f16_nhwc", ratio=0.99),
            dict(layer="conv2a", direction="fwd", config="f16_nhwc", error="failed")])]), f)
    ratios = compare_gpu.read_interleaved([mine])
    check(ratios == {("c3d.txt", "conv3b", "bwd_data", "f16_nhwc"): [0.98, 0.99]},
          f"read_interleaved: {ratios}")
    c3d = next(r for r in compare_gpu.read_suite_json(raw[0], "test") if r["file"] == "c3d.txt")
    check(compare_gpu.one_process_figures(c3d, ratios) ==
          {"f16_nhwc": dict(rows_above_checked=1, rows_above_one_process=[])},
          f"one_process_figures: {compare_gpu.one_process_figures(c3d, ratios)}")
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        json.dump([1, 2], f)
    for path, what in ((bad, "not an interleaved_rows.py --json file"),
                       (os.path.join(tmp, "none.json"), "cannot read")):
        try:
            compare_gpu.read_interleaved([path])
            check(False, f"{path}: no error")
        except compare_gpu.ShapesError as error:
            check(what in str(error), f"{path}: {error}")

# Note [the suite against itself]: dnnx's rounds (even calls) against as many more processes
# with the kept choices (odd calls), the rows of one choice compared as with PyTorch's; a row
# whose choice changed in a later process is counted apart. The figures survive --merge.
itself_ms = {"b2.dw.s2/fwd/f16_nhwc": ([1.03, 1.04, 1.02], [1.0, 1.01, 0.99]),  # beyond
             "b2.dw.s2/bwd_data/f16_nhwc": ([1.02, 1.10, 1.00], [1.0, 1.0, 1.0]),  # within
             "b2.dw.s2/bwd_weights/f16_nhwc": ([1.0, 1.0, 1.0], [0.9, 0.9, 0.9])}  # changed
itself_calls = []


def itself_dnnx(args, shapes_path=None, reuse=False, **_):
    turn, side = divmod(len(itself_calls), 2)
    itself_calls.append(reuse)
    return [dict(kind="device", fingerprint="gpu")] + [
        dict(case(name, times[side][turn],
                  "y" if side and turn == 1 and name.endswith("bwd_weights/f16_nhwc") else "x",
                  0.5), first_call_ms=2.0, from_file=True,
             **dict(zip(("layer", "direction", "config"), name.split("/"))))
        for name, times in itself_ms.items()]


def itself_torch(args, shapes, batch, wanted=None, kernels=None):
    return ({name: dict(kernel_ms=2.0, call_ms=2.1, first_call_ms=9.0) for name in wanted},
            dict(gpu="gpu", torch="2", cudnn="9"))


compare_gpu.run_dnnx, compare_gpu.run_torch = itself_dnnx, itself_torch
with tempfile.TemporaryDirectory() as folder:
    json_path = os.path.join(folder, "suite.json")
    args = suite_args(json_path, against_itself=True)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        compare_gpu.run_suite(args)
    m = compare_gpu.read_suite_json(json_path, "test")[0]["summary"]["f16_nhwc"]
    check(itself_calls == [False, True, True, True, True, True], f"calls: {itself_calls}")
    check(m["itself_rows"] == 2 and m["itself_changed"] == 1
          and m["itself_above"] == ["b2.dw.s2 fwd (1.030)", "b2.dw.s2 bwd_data (1.020)"]
          and m["itself_beyond"] == ["b2.dw.s2 fwd (1.030)"]
          and abs(m["itself_median_ratio"] - 1.025) < 1e-12
          and [round(x, 6) for x in m["itself_round_medians"]] == [1.025, 1.064851, 1.015152],
          f"against itself: {m}")
    check("| mobilenetv2.txt | f16_nhwc | 2 | 2 | 1: b2.dw.s2 fwd (1.030) | 1.025 "
          "| 1.0250, 1.0649, 1.0152 | 1 |" in printed.getvalue(), printed.getvalue())
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        merged = compare_gpu.merge_suites([json_path])
    check(merged[0]["summary"]["f16_nhwc"]["itself_beyond"] == ["b2.dw.s2 fwd (1.030)"]
          and "| mobilenetv2.txt | f16_nhwc | 2 | 2 |" in printed.getvalue(),
          f"merged: {printed.getvalue()}")
compare_gpu.run_dnnx, compare_gpu.run_torch = saved

for extra, expected in ((["--suite", "--rounds", "0"], "--rounds must be 1 or more"),
                        (["--suite", "--rounds", "2", "--against-itself"],
                         "--against-itself needs --reuse-choices"),
                        (["--rounds", "2"], "--rounds runs with the suite"),
                        (["--suite", "--reuse-choices"], "--reuse-choices needs --rounds 2")):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare_gpu.py")] + extra,
                         capture_output=True, text=True)
    check(out.returncode != 0 and expected in out.stderr, f"{extra}: {out.stderr}")

finish(f"compare_gpu suite: {len(files)} files parsed, dry run ok")
