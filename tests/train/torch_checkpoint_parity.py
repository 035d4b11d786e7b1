"""A `dnnx train --save` checkpoint of fashion-cnn loads into the equivalent PyTorch model.

dnnx trains fashion-cnn for a few steps on synthetic data and saves it; PyTorch (torch 1.13) reads
the file with safetensors.torch.load_file and load_state_dict(strict=True) into the same
architecture, and its eval-mode logits on the harness's four images equal dnnx's (reference
backend) within float32 rounding. Exit 77 (a skip) when torch or safetensors is missing.

Usage: torch_checkpoint_parity.py DNNX_BINARY CHECKPOINT_HARNESS
"""

import os
import subprocess
import sys
import tempfile

try:
    import torch
    from torch import nn
    from safetensors.torch import load_file
except ImportError as error:
    print(f"skip: {error}")
    sys.exit(77)

dnnx, harness = sys.argv[1], sys.argv[2]


def fashion_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(inplace=True), nn.Linear(128, 10))


with tempfile.TemporaryDirectory() as folder:
    checkpoint = os.path.join(folder, "fashion.safetensors")
    versions = subprocess.run([dnnx, "version"], capture_output=True, text=True).stdout
    backend = "reference" if "  cpu: unavailable" in versions else "cpu"
    subprocess.run([dnnx, "train", "--model", "fashion-cnn", "--dataset", "synthetic",
                    "--synthetic-size", "256", "--synthetic-test-size", "64", "--batch", "32",
                    "--steps", "6", "--backend", backend, "--progress", "lines",
                    "--save", checkpoint], check=True)
    outputs = os.path.join(folder, "outputs.safetensors")
    subprocess.run([harness, checkpoint, outputs], check=True)
    state = load_file(checkpoint)
    model = fashion_cnn()
    model.load_state_dict(state, strict=True)
    model.eval()
    ours = load_file(outputs)
    with torch.no_grad():
        theirs = model(ours["input"])
    error = (theirs - ours["logits"]).abs().max().item()
    scale = theirs.abs().max().item()
    moved = any((state[k] != fashion_cnn().state_dict()[k]).any() for k in ("1.running_mean",))
    print(f"max |torch - dnnx| = {error:.3g} (logits up to {scale:.3g}); "
          f"batch-norm running mean trained: {bool(moved)}")
    ok = error <= 1e-4 * max(1.0, scale) and bool(moved)
    print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
    sys.exit(0 if ok else 1)
