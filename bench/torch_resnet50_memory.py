"""Peak CUDA memory of a training step of torchvision's ResNet-50 (batch 64, AMP f16,
channels_last; bench/torch_resnet50.py's Trainer) as PyTorch runs it and converted by
dnnx.torch.convert (heuristic choices: the memory of the layers' outputs and saved tensors, not
of a search's workspaces): torch.cuda.max_memory_allocated / max_memory_reserved over three
steps after three warm-up steps, one side after the other:

    python3 bench/torch_resnet50_memory.py
    DNNX_TORCH_EXT=0 python3 bench/torch_resnet50_memory.py   # the layers' Python path
"""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
import torch_resnet50 as b  # noqa: E402

import dnnx.torch as dt  # noqa: E402

base = b.make_model()
for side in ("torch", "dnnx"):
    model = dt.convert(copy.deepcopy(base)) if side == "dnnx" else copy.deepcopy(base)
    tr = b.Trainer(model, side == "dnnx", 64, policy="heuristic")
    tr.run(3)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    tr.run(3)
    torch.cuda.synchronize()
    print(side, "peak allocated MiB", round(torch.cuda.max_memory_allocated() / 2**20),
          "reserved MiB", round(torch.cuda.max_memory_reserved() / 2**20), flush=True)
    del tr, model
    torch.cuda.empty_cache()
