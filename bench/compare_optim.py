#!/usr/bin/env python3
"""dnnx vs PyTorch: one optimizer step over ResNet-50's 161 parameter tensors (25,557,032 values),
in the same run: Adam, AdamW and SGD with momentum, f32 parameters and bf16 parameters with f32
master weights (bench/optim_bench.cpp runs every dnnx candidate).

  GPU:  python3 bench/compare_optim.py --bench build/bench/optim_bench --device cuda [--json out.json]
  CPU:  /usr/bin/python3 bench/compare_optim.py --bench build/bench/optim_bench --device cpu \
            --loop 2 --calls 2 --threads 2

PyTorch takes the same step on the same shapes (torchvision's resnet50 parameter list is rebuilt
here from the architecture, as optim_bench does, and checked: 161 tensors, 25,557,032 values) with
torch.optim.Adam / AdamW / SGD(momentum=0.9) in their fused form (fused=True, where the installed
torch has it for the device) and their foreach form, timed as dnnx is: CUDA events around a loop of
back-to-back steps, divided by the count, median of five loops after three untimed steps (on the
CPU the host clock). The bf16-with-master configuration has no single torch call: torch's step
updates the f32 master parameters, then torch._foreach_copy_ (or a copy_ per tensor) writes them
into the bf16 parameters, what a master-weight AMP loop does. The table gives dnnx's best candidate
over torch's fastest form; the target is <= 1.0 against fused Adam.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def resnet50_shapes():
    shapes = [(64, 3, 7, 7), (64,), (64,)]
    channels = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for block in range(blocks):
            shapes += [(width, channels, 1, 1), (width,), (width,),
                       (width, width, 3, 3), (width,), (width,),
                       (width * 4, width, 1, 1), (width * 4,), (width * 4,)]
            if block == 0:
                shapes += [(width * 4, channels, 1, 1), (width * 4,), (width * 4,)]
            channels = width * 4
    shapes += [(1000, 2048), (1000,)]
    return shapes


def run_dnnx(args):
    cmd = [args.bench, "--backend", "cudnn" if args.device == "cuda" else "cpu",
           "--configs", args.configs, "--ops", args.ops, "--loop", str(args.loop),
           "--calls", str(args.calls)]
    print("$", " ".join(cmd), flush=True)
    env = dict(os.environ)
    if args.bench_library_path:
        env["LD_LIBRARY_PATH"] = args.bench_library_path
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    sys.stderr.write(out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def time_loop(torch, device, loop, step):
    """ms per step: median of five loops of `loop` steps after three untimed ones."""
    for _ in range(3):
        step()
    samples = []
    for _ in range(5):
        if device == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(loop):
                step()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / loop)
        else:
            begin = time.perf_counter()
            for _ in range(loop):
                step()
            samples.append((time.perf_counter() - begin) * 1e3 / loop)
    return statistics.median(samples)


def torch_steps(torch, args, op, config):
    """{form: ms} for torch's forms of one (op, config); a form the installed torch lacks is
    reported as the error it raised."""
    device = torch.device(args.device)
    shapes = resnet50_shapes()
    gen = torch.Generator(device="cpu").manual_seed(1)
    params = [torch.nn.Parameter((torch.rand(s, generator=gen) * 2 - 1).to(device))
              for s in shapes]
    for p in params:
        p.grad = ((torch.rand(p.shape, generator=gen) * 2 - 1) * 1e-2).to(device)
    low = [p.detach().to(torch.bfloat16) for p in params] if config == "bf16_master" else None

    def make(form):
        kw = {"fused": True} if form == "fused" else {"foreach": True}
        if op == "sgd":
            return torch.optim.SGD(params, lr=1e-3, momentum=0.9, weight_decay=1e-4, **kw)
        if op == "adamw":
            return torch.optim.AdamW(params, lr=1e-4, weight_decay=1e-2, **kw)
        return torch.optim.Adam(params, lr=1e-4, **kw)

    results = {}
    for form in ("fused", "foreach"):
        try:
            optimizer = make(form)
            optimizer.step()
        except (TypeError, RuntimeError, ValueError) as error:
            results[form] = f"unavailable: {str(error).splitlines()[0][:80]}"
            continue

        def step(optimizer=optimizer):
            optimizer.step()
            if low is not None:
                master = [p.detach() for p in params]
                if hasattr(torch, "_foreach_copy_"):
                    torch._foreach_copy_(low, master)
                else:
                    for lo, hi in zip(low, master):
                        lo.copy_(hi)

        results[form] = time_loop(torch, args.device, args.loop, step)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="path of the optim_bench executable")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--configs", default="f32,bf16_master")
    parser.add_argument("--ops", default="adam,adamw,sgd")
    parser.add_argument("--loop", type=int, default=20)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--json", help="write every record and torch time here")
    parser.add_argument("--bench-library-path", default="",
                        help="LD_LIBRARY_PATH of the benchmark alone (cuDNN, CUDA libraries)")
    args = parser.parse_args()

    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes = resnet50_shapes()
    total = sum(int(torch.Size(s).numel()) for s in shapes)
    if len(shapes) != 161 or total != 25557032:
        sys.exit(f"ResNet-50's parameter list: 161 tensors of 25,557,032 values expected, got "
                 f"{len(shapes)} of {total}")

    records = run_dnnx(args)
    device = next((r for r in records if r["kind"] == "device"), {})
    cases = [r for r in records if r["kind"] == "case"]
    print(f"dnnx: {device.get('describe', '?')}; torch {torch.__version__} on {args.device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""))
    print(f"ResNet-50: {len(shapes)} parameter tensors, {total:,} values\n")
    print("| op | config | dnnx candidate | dnnx ms | per call ms | GB/s | torch fused ms | "
          "torch foreach ms | dnnx best / torch best |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    report = {"device": device, "torch": torch.__version__, "rows": []}
    for config in args.configs.split(","):
        for op in args.ops.split(","):
            mine = [r for r in cases if r["op"] == op and r["config"] == config]
            if not mine:
                continue
            theirs = torch_steps(torch, args, op, config)
            numbers = [v for v in theirs.values() if isinstance(v, float)]
            best_torch = min(numbers) if numbers else float("nan")
            best = min(r["kernel_ms"] for r in mine)
            for r in mine:
                cell = lambda v: f"{v:.3f}" if isinstance(v, float) else v  # noqa: E731
                ratio = f"{best / best_torch:.2f}" if r["kernel_ms"] == best and numbers else ""
                print(f"| {op} | {config} | {r['algo']} | {r['kernel_ms']:.3f} | "
                      f"{r['per_call_ms']:.3f} | {r['gbps']:.0f} | {cell(theirs['fused'])} | "
                      f"{cell(theirs['foreach'])} | {ratio} |")
            report["rows"].append({"op": op, "config": config, "dnnx": mine, "torch": theirs})
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
