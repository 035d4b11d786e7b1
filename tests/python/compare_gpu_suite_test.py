#!/usr/bin/env python3
"""bench/compare_gpu.py without a GPU: every shapes file of the suite parses (Note [shapes file
lines]), its layers' output sizes are positive, bad fields are errors naming the line, and the
--dry-run listing runs. No torch, no benchmark binary."""

import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import compare_gpu  # noqa: E402

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


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

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"compare_gpu suite: {len(files)} files parsed, dry run ok")
