#!/usr/bin/env python3
"""dnnx vs PyTorch: recurrent layers (LSTM, GRU) on the GPU, inference and a training step, in the
same run (bench/rnn_bench.cpp selects every direction exhaustively among cuDNN's RNN algorithms and
math types).

  python3 bench/compare_rnn.py --bench build/bench/rnn_bench [--rows ...] [--dtypes f16,f32] \
      [--bench-library-path PATH] [--json out.json] [--device cpu --threads 2]

With --device cpu, dnnx runs on its cpu backend (oneDNN) and PyTorch on the CPU with
torch.set_num_threads(--threads); both are timed on the host clock (time.perf_counter for torch,
the backend's timer for dnnx), median of five loops after three untimed ones.

PyTorch runs torch.nn.LSTM / nn.GRU of the same shape (input size = hidden size, seq-major, with
initial states) on cuDNN, picking its algorithm by its fixed rules: the inference forward under
torch.no_grad(), and a training step of forward plus backward of sum(output * g), which computes
the gradients of the input, the initial states and every parameter (what dnnx's step computes).
Timed as dnnx is: CUDA events around a loop of back-to-back calls, divided by the count, median
of five loops after three untimed ones. f32 rows run with torch.backends.cudnn.allow_tf32 = False,
dnnx's default (dnnx admits TF32 math for f32 only with DNNX_ALLOW_TF32=1). The table gives each
row's times and the ratio dnnx / torch (below 1: dnnx faster), and the totals.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys


def torch_rule(row, forward, major, minor, sm_count):
    """The algorithm PyTorch 2.x's fixed rules pick for a row on cuDNN >= 8.2.1 (get_algo and its
    helpers in aten/src/ATen/native/cudnn/RNN.cpp, restated: nothing of PyTorch's is called):
    persist_static_small_h for a small hidden size (LSTM / GRU: <= 192 forward, <= 128
    backward), persist_static for f16 single-layer unidirectional layers of sizes that are
    multiples of 128 on a GPU and batch its device rules admit (never GRU), else standard. Rows
    have input size = hidden size and are never packed."""
    hidden, cell = row["hidden"], row["cell"]
    if cell in ("lstm", "gru"):
        small_h = hidden <= (192 if forward else 128)
    else:
        small_h = hidden <= (384 if forward else 256)
    if major >= 6 and small_h:
        return "persist_static_small_h"
    common = (row["layers"] == 1 and hidden <= 1024 and not row["bidirectional"]
              and hidden % 128 == 0)
    batch = row["batch"]
    if row["dtype"] == "f16" and common:
        if major == 7:
            device = minor != 5 and (((batch % 16 == 0 and batch not in (80, 112)) or batch == 8)
                                     and ((row["seq"] >= 40 and batch <= 128)
                                          or (row["seq"] >= 20 and batch <= 96)
                                          or (row["seq"] >= 10 and batch <= 32)))
        elif major >= 8 and sm_count >= 98 and minor != 6:
            if cell == "gru":
                device = False
            elif cell == "lstm":
                device = batch % 8 == 0 and batch <= 128
            else:
                device = batch % 8 == 0 and batch <= 128 and (batch < 96 or hidden < 896)
        else:
            device = False
        if device:
            return "persist_static"
    return "standard"


def run_dnnx(args):
    cmd = [args.bench, "--backend", "cpu" if args.device == "cpu" else "cudnn", "--dtypes", args.dtypes, "--loop", str(args.loop)]
    if args.rows:
        cmd += ["--rows", args.rows]
    print("$", " ".join(cmd), flush=True)
    env = dict(os.environ)
    if args.bench_library_path:
        env["LD_LIBRARY_PATH"] = args.bench_library_path
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    sys.stderr.write(out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def time_loop(torch, loop, step, device="cuda"):
    for _ in range(3):
        step()
    if device == "cpu":
        import time
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(loop):
                step()
            samples.append((time.perf_counter() - start) * 1e3 / loop)
        return statistics.median(samples)
    samples = []
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(loop):
            step()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / loop)
    return statistics.median(samples)


def torch_row(torch, row, loop, device="cuda"):
    dtype = {"f16": torch.float16, "f32": torch.float32, "bf16": torch.bfloat16}[row["dtype"]]
    torch.backends.cudnn.allow_tf32 = False
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}.get(row["cell"])
    kwargs = dict(input_size=row["hidden"], hidden_size=row["hidden"], num_layers=row["layers"],
                  bidirectional=row["bidirectional"])
    if cls is None:
        cls = torch.nn.RNN
        kwargs["nonlinearity"] = row["cell"][4:]
    module = cls(**kwargs).to(device=device, dtype=dtype)
    d = 2 if row["bidirectional"] else 1
    x = torch.rand(row["seq"], row["batch"], row["hidden"], device=device, dtype=dtype,
                   requires_grad=True)
    h = torch.rand(row["layers"] * d, row["batch"], row["hidden"], device=device, dtype=dtype,
                   requires_grad=True)
    state = (h, torch.rand_like(h).requires_grad_()) if row["cell"] == "lstm" else h
    g = torch.rand(row["seq"], row["batch"], d * row["hidden"], device=device, dtype=dtype)

    def inference():
        with torch.no_grad():
            module(x, state)

    def training():
        y, _ = module(x, state)
        y.backward(g)

    return time_loop(torch, loop, inference, device), time_loop(torch, loop, training, device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="path of rnn_bench")
    parser.add_argument("--rows", default="", help="rnn_bench's --rows (default: its own)")
    parser.add_argument("--dtypes", default="f16,f32")
    parser.add_argument("--loop", type=int, default=5)
    parser.add_argument("--bench-library-path", default="",
                        help="LD_LIBRARY_PATH for rnn_bench (its cuDNN), not for torch")
    parser.add_argument("--json", help="write every row's figures here")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: dnnx's cpu backend against PyTorch on the CPU")
    parser.add_argument("--threads", type=int, default=2, help="PyTorch's threads with --device cpu")
    args = parser.parse_args()
    rows = run_dnnx(args)
    import torch  # after dnnx ran: torch brings its own cuDNN
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
        print(f"torch {torch.__version__} on the CPU, {torch.get_num_threads()} threads\n")
    elif not torch.cuda.is_available():
        print("compare_rnn: torch has no CUDA device", file=sys.stderr)
        return 1
    else:
        print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
              f"{torch.cuda.get_device_name()}\n")
    props = torch.cuda.get_device_properties(0) if args.device != "cpu" else None
    print("| row | dtype | dnnx inference ms | torch | ratio | dnnx training ms | torch | ratio |"
          " dnnx algorithms (fwd / training) |" + (" PyTorch's rules (fwd / bwd) |" if props else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if props else ""))
    totals = [0.0, 0.0, 0.0, 0.0]
    for row in rows:
        inference, training = torch_row(torch, row, args.loop, args.device)
        row["torch_inference_ms"], row["torch_training_ms"] = inference, training
        rules = ""
        if props:
            row["torch_rule_fwd"], row["torch_rule_bwd"] = (
                torch_rule(row, forward, props.major, props.minor, props.multi_processor_count)
                for forward in (True, False))
            rules = f" {row['torch_rule_fwd']} / {row['torch_rule_bwd']} |"
        totals = [a + b for a, b in zip(totals, (row["inference_ms"], inference,
                                                  row["training_ms"], training))]
        print(f"| {row['row']} | {row['dtype']} | {row['inference_ms']:.3f} | {inference:.3f} | "
              f"{row['inference_ms'] / inference:.2f} | {row['training_ms']:.3f} | "
              f"{training:.3f} | {row['training_ms'] / training:.2f} | "
              f"{row['fwd_algo']} / {row['training_algo']} |{rules}")
    if rows:
        print(f"| total | | {totals[0]:.3f} | {totals[1]:.3f} | {totals[0] / totals[1]:.2f} | "
              f"{totals[2]:.3f} | {totals[3]:.3f} | {totals[2] / totals[3]:.2f} | |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
