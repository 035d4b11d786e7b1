"""Host time per training step of torchvision's ResNet-50 (batch 64, AMP f16, channels_last;
bench/torch_resnet50.py's Trainer), PyTorch's and converted by dnnx.torch.convert (heuristic
choices), the two sides in turns, ROUNDS rounds (default 9) of 20 steps: the process's CPU time
(time.process_time, every thread) and the wall time per step, each side's median, and their
ratios. Where both steps are bound by the host, as on the H200's host, the CPU time is the cost
the converted layers change. Run as

    python3 bench/torch_resnet50_host.py [ROUNDS]
"""
import copy
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch_resnet50 as b  # noqa: E402

import dnnx.torch as dt  # noqa: E402

base = b.make_model()
trainers = {}
for side in ("torch", "dnnx"):
    model = dt.convert(copy.deepcopy(base)) if side == "dnnx" else copy.deepcopy(base)
    tr = b.Trainer(model, side == "dnnx", 64, policy="heuristic")
    tr.run(5)
    trainers[side] = tr
torch.cuda.synchronize()
cpu = {s: [] for s in trainers}
wall = {s: [] for s in trainers}
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 9):
    for side, tr in trainers.items():
        torch.cuda.synchronize()
        c0, w0 = time.process_time(), time.perf_counter()
        tr.run(20)
        torch.cuda.synchronize()
        cpu[side].append((time.process_time() - c0) * 1e3 / 20)
        wall[side].append((time.perf_counter() - w0) * 1e3 / 20)
for side in trainers:
    for name, values in (("cpu", cpu[side]), ("wall", wall[side])):
        print(side, name, "ms/step", [round(x, 2) for x in values], "median",
              round(statistics.median(values), 2))
print("cpu torch/dnnx", round(statistics.median(cpu["torch"]) / statistics.median(cpu["dnnx"]), 3),
      "wall torch/dnnx",
      round(statistics.median(wall["torch"]) / statistics.median(wall["dnnx"]), 3))
