#!/usr/bin/env python3
"""What Note [recurrent weights cache] saves: a dnnx.torch-converted nn.LSTM called with its flat
weights kept (the default: the parameters' concatenation and each backend's conversion of it are
reused while no parameter changes) against the same calls with the cache dropped before each one
(dnnx.torch.weights_changed: a concatenation and a conversion per call, as before the cache).
Inference (no_grad forward) and a training step (forward, backward, SGD step: the weights change
every step, so both ways concatenate and convert once per step).

  python3 bench/torch_rnn_cache.py [--device cpu|cuda] [--shapes H:L:bi:dtype,...]

Per-call milliseconds of the median of --rounds rounds of --iters calls each, the two ways taking
turns (each twice); the host clock around the loop, synchronised on CUDA.
"""

import argparse
import statistics
import time

import torch

import dnnx.torch as dt


def per_call_ms(model, fn, forget, iters, rounds, sync):
    times = []
    for r in range(rounds + 1):
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            if forget:
                dt.weights_changed(model)
            fn()
        sync()
        if r:  # the first round warms up
            times.append((time.perf_counter() - start) * 1e3 / iters)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--shapes", default="256:2:0:f32,512:1:1:f32",
                        help="hidden:layers:bidirectional(0/1):dtype (f32, f16, bf16), comma-separated")
    parser.add_argument("--seq", type=int, default=50)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    print(f"torch {torch.__version__}, device {device}, seq {args.seq}, batch {args.batch}\n")
    print("| LSTM (input = hidden) | call | kept ms | per-call copy ms | kept / per-call |")
    print("|---|---|--:|--:|--:|")
    for shape in args.shapes.split(","):
        hidden, layers, bidirectional, dtype = shape.split(":")
        hidden, layers, bidirectional = int(hidden), int(layers), bidirectional == "1"
        torch.manual_seed(0)
        model = dt.convert(torch.nn.LSTM(hidden, hidden, num_layers=layers,
                                         bidirectional=bidirectional)).to(device, dtypes[dtype])
        x = torch.randn(args.seq, args.batch, hidden, device=device, dtype=dtypes[dtype])
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)

        def train():
            optimizer.zero_grad(set_to_none=True)
            out, _ = model(x)
            out.float().sum().backward()
            optimizer.step()

        def infer():
            with torch.no_grad():
                model(x)

        name = f"H {hidden}, {layers} layer(s){', bidirectional' if bidirectional else ''}, {dtype}"
        for call, fn in (("inference", infer), ("training step", train)):
            kept, copied = [], []
            for _ in range(2):
                kept.append(per_call_ms(model, fn, False, args.iters, args.rounds, sync))
                copied.append(per_call_ms(model, fn, True, args.iters, args.rounds, sync))
            k, c = min(kept), min(copied)
            print(f"| {name} | {call} | {k:.3f} | {c:.3f} | {k / c:.2f} |", flush=True)


if __name__ == "__main__":
    main()
