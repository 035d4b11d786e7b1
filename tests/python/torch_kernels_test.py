#!/usr/bin/env python3
"""bench/torch_kernels.py's reading of the cuDNN frontend's log without a GPU: a made-up log's
searches, each plan's tag turned into dnnx's id of the same engine configuration (the knob names
read from src/backends/cudnn/graph_util.cpp), and the listing matched to layer-directions only
when the counts agree. No torch."""

import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_checks import check, finish  # noqa: E402
import torch_kernels  # noqa: E402


names = torch_kernels.knob_names()
check(len(names) >= 44, f"knob names: {len(names)}")
check(names[:3] == ["split_k", "swizzle", "tile_size"], f"knob names: {names[:3]}")
check(names[25] == "workspace" and names[27] == "tile_cga_m", f"knob names: {names[25:29]}")

ids = {
    "ConvBwdFilter_eng62_k25=2": "cudnn:engine:62:workspace=2",
    "ConvFwd_eng0": "cudnn:engine:0",
    "ConvBwdData_eng67_k2=1_k13=0_k18=0_k25=0_k27=7_k28=1":
        "cudnn:engine:67:tile_size=1,tilek=0,idx_mode=0,workspace=0,tile_cga_m=7,tile_cga_n=1",
    "ConvFwd_eng3_k99=-1": "cudnn:engine:3:k99=-1",
}
for tag, expected in ids.items():
    got = torch_kernels.dnnx_id(tag, names)
    check(got == expected, f"dnnx_id({tag}) = {got}, expected {expected}")
check(torch_kernels.dnnx_id("not a plan tag", names) is None, "a tag without an engine")
check(torch_kernels.dnnx_id("ConvFwd_eng4_k2=1", []) == "cudnn:engine:4:k2=1",
      "without the table the knobs are k<N>")

log = """[cudnn_frontend] CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR : ConvFwd_eng0, numeric_notes:[]
[cudnn_frontend] Plan ConvFwd_eng0 took    0.500000
[cudnn_frontend] Plan ConvFwd_eng62_k25=1 took   0.0400
[cudnn_frontend] Successfully profiled 2plans.
[cudnn_frontend] Auto-tuning returns 2 plans.
[cudnn_frontend] Plan ConvBwdFilter_eng65_k2=7_k27=1_k28=2 took  1.5e-02
[cudnn_frontend] Auto-tuning returns 1 plans.
"""
searches = torch_kernels.frontend_searches(log)
check(searches == [[("ConvFwd_eng0", 0.5), ("ConvFwd_eng62_k25=1", 0.04)],
                   [("ConvBwdFilter_eng65_k2=7_k27=1_k28=2", 0.015)]], f"searches: {searches}")
check(torch_kernels.frontend_searches("no plans here\n") == [], "a log without searches")

out = io.StringIO()
with contextlib.redirect_stdout(out):
    torch_kernels.print_searches(searches, ["a fwd", "b bwd_weights"], names)
text = out.getvalue()
check("a fwd: the frontend's timing" in text and "b bwd_weights:" in text, text)
first = text.index("ConvFwd_eng62_k25=1")
check(first < text.index("ConvFwd_eng0"), "fastest first:\n" + text)
check("cudnn:engine:62:workspace=1" in text, text)
check("cudnn:engine:65:tile_size=7,tile_cga_m=1,tile_cga_n=2" in text, text)

out = io.StringIO()
with contextlib.redirect_stdout(out):
    torch_kernels.print_searches(searches, ["only one"], names)
text = out.getvalue()
check("holds 2 searches for 1 layer-directions" in text and "search 2:" in text, text)
check("only one" not in text, "unmatched searches keep no label:\n" + text)

finish("passed: torch_kernels.py's frontend log reading")
