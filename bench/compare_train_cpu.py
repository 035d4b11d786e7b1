"""The Fashion-MNIST CNN's training step on the CPU: `dnnx train` (the cpu backend) against the
same model in PyTorch, in the same run, rounds in turns.

    /usr/bin/python3 bench/compare_train_cpu.py --dnnx build/tools/dnnx/dnnx \
        [--steps 120] [--batch 64] [--rounds 3] [--threads 2]

dnnx: `dnnx train --model fashion-cnn --dataset synthetic --steps N` (SGD, lr 0.05, momentum
0.9, f32), whose epoch line gives images per second over the epoch's steps: the background data
loader, the optimizer step and the accuracy count on the device included, the first step's
algorithm selection too. PyTorch: nn.Sequential of the same layers (Conv2d 1->32, BatchNorm2d,
ReLU, MaxPool2d, Conv2d 32->64, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear 3136->128, ReLU,
Linear 128->10), torch.optim.SGD with the same settings, on ten preallocated random batches
(no data loading), timed with the host clock after five untimed steps. Both on `threads` threads.
Prints one Markdown row per round and the medians.
"""

import argparse
import os
import re
import statistics
import subprocess
import time

import torch


def dnnx_images_per_s(binary, steps, batch, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), DNNX_CACHE="off")
    out = subprocess.run(
        [binary, "train", "--model", "fashion-cnn", "--dataset", "synthetic", "--synthetic-size",
         str(steps * batch), "--synthetic-test-size", str(batch), "--steps", str(steps),
         "--batch", str(batch), "--optimizer", "sgd", "--backend", "cpu", "--progress", "lines"],
        check=True, capture_output=True, text=True, env=env)
    found = re.findall(r"([0-9.]+) img/s", out.stdout + out.stderr)
    if not found:
        raise RuntimeError(f"dnnx train printed no img/s:\n{out.stdout}\n{out.stderr}")
    return float(found[-1])


def torch_images_per_s(steps, batch, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(inplace=True), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images = [torch.randn(batch, 1, 28, 28) for _ in range(10)]
    labels = [torch.randint(0, 10, (batch,)) for _ in range(10)]

    def run(count):
        for i in range(count):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(images[i % 10]), labels[i % 10])
            loss.backward()
            optimizer.step()

    run(5)
    start = time.perf_counter()
    run(steps)
    return steps * batch / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dnnx", required=True, help="the dnnx binary")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"Fashion-MNIST CNN training step, batch {args.batch}, {args.steps} steps, "
          f"{args.threads} threads, PyTorch {torch.__version__}")
    print()
    print("| round | dnnx img/s | PyTorch img/s | dnnx / PyTorch time |")
    print("|---|--:|--:|--:|")
    ratios, ours_all, theirs_all = [], [], []
    for round_ in range(args.rounds):
        ours = dnnx_images_per_s(args.dnnx, args.steps, args.batch, args.threads)
        theirs = torch_images_per_s(args.steps, args.batch, args.threads)
        ratios.append(theirs / ours)
        ours_all.append(ours)
        theirs_all.append(theirs)
        print(f"| {round_ + 1} | {ours:.0f} | {theirs:.0f} | {theirs / ours:.2f} |")
    print(f"| median | {statistics.median(ours_all):.0f} | {statistics.median(theirs_all):.0f} | "
          f"**{statistics.median(ratios):.2f}** |")


if __name__ == "__main__":
    main()
