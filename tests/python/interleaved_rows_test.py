#!/usr/bin/env python3
"""bench/interleaved_rows.py without a GPU: its --rows / --layers x --directions selection and
errors, and the PyTorch operands and calls it shares with compare_gpu.py run on the CPU in every
direction with the shapes dnnx's descs expect (fwd gives dy's shape, bwd_data x's, bwd_weights
w's), channels-last where the config says so. Exits 77 without torch."""

import argparse
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_checks import ROOT, check, finish  # noqa: E402
import compare_gpu  # noqa: E402
import interleaved_rows  # noqa: E402

shapes, batch = compare_gpu.read_shapes_file(
    os.path.join(ROOT, "bench", "shapes", "unet.txt"), "all")


def rows(**kw):
    args = argparse.Namespace(rows="", layers="", directions="fwd,bwd_data,bwd_weights")
    vars(args).update(kw)
    return [(s["name"], d) for s, d in interleaved_rows.parse_rows(args, shapes)]


check(rows(rows="d3.conv2:fwd,e3.conv1:bwd_weights") ==
      [("d3.conv2", "fwd"), ("e3.conv1", "bwd_weights")], "--rows pairs, in order")
check(rows(layers="e1.conv1,d3.conv2", directions="bwd_data,fwd") ==
      [("e1.conv1", "bwd_data"), ("e1.conv1", "fwd"), ("d3.conv2", "bwd_data"),
       ("d3.conv2", "fwd")], "--layers x --directions")
check(len(rows()) == 3 * len(shapes), "every layer and direction by default")
for bad, what in (("d3.conv2", "not LAYER:DIRECTION"), ("d3.conv2:sideways", "not a direction"),
                  ("nowhere:fwd", "no layer 'nowhere'")):
    try:
        rows(rows=bad)
        check(False, f"--rows {bad}: no error")
    except compare_gpu.ShapesError as error:
        check(what in str(error), f"--rows {bad}: {error}")



def plan(**kw):
    args = argparse.Namespace(shapes="", rows="", layers="", directions="fwd,bwd_data,bwd_weights",
                              configs="f16_nhwc", from_suite="", files="", batch=0)
    vars(args).update(kw)
    return [(os.path.basename(path), batch, [(s["name"], d, c) for s, d, c in rows])
            for path, batch, rows in interleaved_rows.plan(args)]


check(plan(shapes="unet", rows="d3.conv2:fwd", configs="f16_nhwc,f32_nchw") ==
      [("unet.txt", 1, [("d3.conv2", "fwd", "f16_nhwc"), ("d3.conv2", "fwd", "f32_nchw")])],
      "--shapes: the file's batch, each row in each config")
check(plan(shapes="unet", rows="d3.conv2:fwd", batch=4)[0][1] == 4, "--batch")
# The raw files of the fp16 table: their rows above 1.00, as compare_gpu.py --merge counts them.
results = os.path.join(ROOT, "bench", "results")
suites = ",".join(os.path.join(results, f) for f in (
    "gpu-shapes-f16-gated-h200.json.gz", "gpu-shapes-deeplabv3-f16-gated-h200.json.gz"))
expected = {}
for suite in suites.split(","):
    for result in compare_gpu.read_suite_json(suite, "test"):
        above = compare_gpu.rows_above_one(result)
        if above:
            expected[result["file"]] = (result["batch"], [(l, d, c) for l, d, c, *_ in above])
        with contextlib.redirect_stdout(io.StringIO()):
            tables = compare_gpu.print_file_tables(result)
        counted = sum(figures["rows_above"] for figures in tables.values())
        check(counted == len(above), f"{result['file']}: the tables count {counted}, {above}")
everything = plan(from_suite=suites)
check({f: (b, rows) for f, b, rows in everything} == expected and len(everything) >= 2,
      f"--from-suite: {everything}")
check(all(ratio > 1.0 for r in compare_gpu.read_suite_json(suites.split(",")[0], "t")
          for *_, ratio, _ in compare_gpu.rows_above_one(r)), "rows_above_one: ratios above 1")
some = plan(from_suite=suites, files="unet")
check([f for f, *_ in some] == ["unet.txt"] and some[0][1] == 1, f"--files: {some}")
for kw, what in ((dict(), "--shapes or --from-suite"),
                 (dict(from_suite="/nonexistent.json"), "cannot read"),
                 (dict(shapes="unet", configs="f8_x"), "unknown config")):
    try:
        plan(**kw)
        check(False, f"{kw}: no error")
    except compare_gpu.ShapesError as error:
        check(what in str(error), f"{kw}: {error}")

# The table's verdicts on made-up rows: the main kernel leaves memsets and cuDNN's workspace
# initialisation aside; a failed row is listed with its error and counted apart.
kernels = lambda *names: [dict(name=n, launches=1, us=1.0) for n in names]  # noqa: E731
check(interleaved_rows.main_kernel(kernels("Memset (Device)", "sm90_xmma_dgrad_a")) ==
      "sm90_xmma_dgrad_a", "main kernel: the memset aside")
check(interleaved_rows.main_kernel(kernels("Memset (Device)")) == "", "main kernel: none")


def made_up(layer, ratio, same):
    return dict(layer=layer, direction="fwd", config="f16_nhwc", dnnx_median_ms=ratio,
                torch_median_ms=1.0, ratio=ratio, paired=[ratio], dnnx_spread=1.0,
                torch_spread=1.0, dnnx_algo="x", gated=True, same_kernel=same,
                dnnx_kernels=kernels("k"), torch_kernels=kernels("k" if same else "other"))


made = [made_up("a", 1.004, True), made_up("b", 1.02, True), made_up("c", 1.03, False),
        made_up("d", 0.9, False),
        dict(layer="e", direction="fwd", config="f16_nhwc", error="Unsupported: no engine\nmore")]
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    interleaved_rows.print_rows(made, True)
text = printed.getvalue()
check("4 rows timed (1 failed), 2 above 1.00, 1 of them on the same kernel as PyTorch" in text,
      f"summary: {text}")
check("| e | fwd | f16_nhwc | failed: Unsupported: no engine |" in text, f"failed row: {text}")
check(text.count("| yes |") == 2 and text.count("| no |") == 2, f"same-kernel column: {text}")

# main's own argument errors exit 2 before torch is imported.
for argv in (["--shapes", "unet", "--rows", "d3.conv2:up"], ["--shapes", "nofile"],
             ["--shapes", "unet", "--turns", "0"], ["--shapes", "unet", "--configs", "f8_x"],
             []):
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            interleaved_rows.main(argv)
            check(False, f"{argv}: no error")
        except SystemExit as exit_:
            check(exit_.code == 2, f"{argv}: exit {exit_.code}")

try:
    import torch
except ImportError:
    print("torch is not importable: the operands' checks skipped")
    sys.exit(77)

video, _ = compare_gpu.read_shapes_file(os.path.join(ROOT, "bench", "shapes", "c3d.txt"), "all")
deeplab, _ = compare_gpu.read_shapes_file(
    os.path.join(ROOT, "bench", "shapes", "deeplabv3.txt"), "all")
cases = [next(s for s in shapes if s["name"] == "d3.conv2"), video[0],
         next(s for s in deeplab if s["groups"] == 1 and max(s["dilation"]) > 1)]
for s in cases:
    # Channel counts cut down: the shapes and layouts are what is checked, not speed.
    s = dict(s, c=min(s["c"], 8), o=min(s["o"], 8), cg=min(s["cg"], 8),
             spatial=[min(v, 12 + 2 * p) for v, p in zip(s["spatial"], s["pad"])])
    if min(compare_gpu.output_size(s)) < 1:
        continue
    for config, dtype in (("f32_nhwc", torch.float32), ("f32_nchw", torch.float32)):
        x, w, dy = compare_gpu.torch_operands(torch, s, 2, dtype, config, device="cpu")
        rank = len(s["spatial"])
        last = {2: torch.channels_last, 3: torch.channels_last_3d}[rank]
        check(x.is_contiguous(memory_format=last) == config.endswith("nhwc"),
              f"{s['name']} {config}: x's layout")
        check(float(x.abs().max()) <= 1 and float(x.abs().max()) > 0, f"{s['name']}: x's values")
        fwd = compare_gpu.torch_call(torch, s, "fwd", x, w, dy)()
        check(fwd.shape == dy.shape, f"{s['name']} {config} fwd: {fwd.shape} vs {dy.shape}")
        expected = torch.nn.functional.conv3d if rank == 3 else torch.nn.functional.conv2d
        ref = expected(x, w, None, s["stride"], s["pad"], s["dilation"], s["groups"])
        check(torch.allclose(fwd, ref, atol=1e-4), f"{s['name']} {config} fwd values")
        dx = compare_gpu.torch_call(torch, s, "bwd_data", x, w, dy)()[0]
        check(dx.shape == x.shape, f"{s['name']} {config} bwd_data: {dx.shape}")
        dw = compare_gpu.torch_call(torch, s, "bwd_weights", x, w, dy)()[1]
        check(dw.shape == w.shape, f"{s['name']} {config} bwd_weights: {dw.shape}")

finish("interleaved_rows: selection, errors and PyTorch's operands and calls OK")
