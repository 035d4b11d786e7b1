"""A ResNet-50 training step on the GPU, dnnx::nn against PyTorch in the same run: batch 64,
224 x 224, synthetic data already on the device, fp16 NHWC with f32 master weights.

    python bench/train_resnet50_gpu.py --bench build/bench/train_bench
        [--bench-library-path PATH] [--batch 64] [--size 224] [--steps 20] [--warmup 5]
        [--rounds 3] [--json FILE]

dnnx: bench/train_bench (dnnx::nn ResNet-50 converted to f16 with f32 master copies, every layer
channels_last (nn::to_layout), exhaustive selection for every op and direction, SGD momentum
0.9, a static loss scale: Note [train bench loss scaling]). PyTorch: torchvision's resnet50,
channels_last, torch.autocast(f16) + GradScaler, SGD(momentum 0.9, fused=True),
cudnn.benchmark=True. TF32 is off on both sides.

Order: dnnx in a fresh process with an empty choice-cache file (its first step selects and
times every layer's algorithms), then PyTorch in this process, then dnnx again in a second
process reading the cache the first one wrote (its first step is the cached one), then PyTorch's
first step in a fresh process of its own (cudnn.benchmark searches again: PyTorch keeps no
cache). Step times are CUDA events around `steps` back-to-back steps on each side's stream
(Note [train bench timing] in bench/train_bench.cpp), median over the rounds of both dnnx
processes and over PyTorch's rounds. Peak memory: the dnnx caching allocator's most bytes handed
out / held against torch.cuda.max_memory_allocated / max_memory_reserved, over the whole run and
over the timed rounds alone.

Prints a Markdown table; --json writes every figure. --device cpu runs both sides on the host
(dnnx's cpu backend, the host clock) for a smoke check of this script.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run_bench(args, extra, cache_file):
    command = [args.bench, "--device", args.device, "--model", "resnet50",
               "--batch", str(args.batch), "--size", str(args.size), "--dtype", "f16",
               "--layout", "nhwc", "--policy", args.policy, "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--rounds", str(args.rounds), "--lr", str(args.lr),
               *(["--graph"] if args.graph else []), *extra]
    env = dict(os.environ, DNNX_CACHE="readwrite", DNNX_CACHE_FILE=cache_file)
    if args.bench_library_path:
        env["LD_LIBRARY_PATH"] = args.bench_library_path
    out = subprocess.run(command, capture_output=True, text=True, env=env)
    sys.stderr.write(out.stderr)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {out.returncode}:\n{out.stdout}\n"
                           f"{out.stderr}")
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{' '.join(command)} printed no JSON line:\n{out.stdout}")
    return json.loads(lines[-1])


class TorchTrainer:
    def __init__(self, torch, torchvision, device, batch, size, lr=0.01):
        self.torch = torch
        self.device = device
        torch.manual_seed(0)
        self.model = torchvision.models.resnet50().to(device).to(
            memory_format=torch.channels_last)
        try:
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9,
                                             fused=True)
        except (TypeError, RuntimeError):
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        cuda = device == "cuda"
        # On the host (the smoke check of this script) no loss scaling: bf16 autocast needs none.
        self.scaler = torch.amp.GradScaler("cuda") if cuda else None
        self.autocast_dtype = torch.float16 if cuda else torch.bfloat16
        gen = torch.Generator(device=device).manual_seed(1)
        self.x = torch.rand(batch, 3, size, size, device=device, generator=gen).mul_(2).sub_(
            1).contiguous(memory_format=torch.channels_last)
        self.labels = torch.randint(0, 1000, (batch,), device=device, generator=gen)

    def step(self):
        torch = self.torch
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(self.device, dtype=self.autocast_dtype):
            loss = torch.nn.functional.cross_entropy(self.model(self.x), self.labels)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
            return loss
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss

    def graphed_ms(self, steps, rounds, scale=1024.0):
        """The step captured into a CUDA graph and replayed (train_bench's --graph): a static
        loss scale, the gradients multiplied back by one foreach kernel before the same fused
        SGD, since GradScaler's step reads found_inf on the host and cannot be captured."""
        torch = self.torch

        def step():
            with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):
                loss = torch.nn.functional.cross_entropy(self.model(self.x), self.labels)
            (loss * scale).backward()
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            torch._foreach_mul_(grads, 1.0 / scale)
            self.optimizer.step()

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                self.optimizer.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            step()
        torch.cuda.synchronize()
        times = []
        for _ in range(rounds):
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(steps):
                graph.replay()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / steps)
        return times

    def host_ms(self, steps):
        """The host clock around single steps started on an idle GPU (train_bench's host_ms)."""
        times = []
        for _ in range(steps):
            self.sync()
            start = time.perf_counter()
            self.step()
            times.append((time.perf_counter() - start) * 1000.0)
        self.sync()
        return times

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def first_step_s(self):
        self.sync()
        start = time.perf_counter()
        loss = self.step()
        self.sync()
        return time.perf_counter() - start, float(loss.item())

    def timed_ms(self, steps):
        torch = self.torch
        if self.device != "cuda":
            start = time.perf_counter()
            for _ in range(steps):
                self.step()
            return (time.perf_counter() - start) * 1000.0 / steps
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(steps):
            self.step()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / steps


def torch_modules():
    import torch
    import torchvision
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch, torchvision


def torch_run(args):
    torch, torchvision = torch_modules()
    trainer = TorchTrainer(torch, torchvision, args.device, args.batch, args.size, args.lr)
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    first = trainer.first_step_s()
    for _ in range(args.warmup):
        trainer.step()
    trainer.sync()
    result = {"first_step_s": first[0], "first_loss": first[1]}
    if cuda:
        result["peak_bytes_in_use"] = torch.cuda.max_memory_allocated()
        result["peak_bytes_reserved"] = torch.cuda.max_memory_reserved()
        torch.cuda.reset_peak_memory_stats()
    result["step_ms"] = [trainer.timed_ms(args.steps) for _ in range(args.rounds)]
    if cuda:
        result["steady_peak_bytes_in_use"] = torch.cuda.max_memory_allocated()
        result["steady_peak_bytes_reserved"] = torch.cuda.max_memory_reserved()
        result["peak_bytes_in_use"] = max(result["peak_bytes_in_use"],
                                          result["steady_peak_bytes_in_use"])
        result["peak_bytes_reserved"] = max(result["peak_bytes_reserved"],
                                            result["steady_peak_bytes_reserved"])
        result["device_name"] = torch.cuda.get_device_name()
        result["cudnn"] = torch.backends.cudnn.version()
    result["torch"] = torch.__version__
    result["last_loss"] = float(trainer.step().item())
    if cuda:
        result["host_ms"] = trainer.host_ms(args.steps)
        if args.graph:
            result["graph_step_ms"] = trainer.graphed_ms(args.steps, args.rounds)
    return result


def torch_first_step_fresh(args):
    command = [sys.executable, os.path.abspath(__file__), "--torch-first-step-only",
               "--device", args.device, "--batch", str(args.batch), "--size", str(args.size)]
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)  # PyTorch brings its own cuDNN
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["first_step_s"]


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def mib(value):
    return f"{value / 2**20:.0f}" if value else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", help="path of train_bench")
    parser.add_argument("--bench-library-path", default="",
                        help="LD_LIBRARY_PATH for train_bench (its cuDNN), not for torch")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--policy", choices=["exhaustive", "heuristic"], default="exhaustive")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.01, help="SGD's learning rate, both sides")
    parser.add_argument("--graph", action="store_true",
                        help="also each side's step captured into a CUDA graph and replayed")
    parser.add_argument("--json")
    parser.add_argument("--torch-first-step-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.torch_first_step_only:
        torch, torchvision = torch_modules()
        trainer = TorchTrainer(torch, torchvision, args.device, args.batch, args.size, args.lr)
        print(json.dumps({"first_step_s": trainer.first_step_s()[0]}))
        return
    if not args.bench:
        parser.error("--bench is required")

    cache_file = os.path.join(tempfile.mkdtemp(prefix="dnnx-train-bench-"), "choices.json")
    fresh = run_bench(args, [], cache_file)
    theirs = torch_run(args)
    cached = run_bench(args, [], cache_file)
    theirs["fresh_process_first_step_s"] = torch_first_step_fresh(args)

    ours_ms = median(fresh["step_ms"] + cached["step_ms"])
    theirs_ms = median(theirs["step_ms"])
    ours_rate = args.batch * 1000.0 / ours_ms
    theirs_rate = args.batch * 1000.0 / theirs_ms
    where = theirs.get("device_name", "host")
    print(f"ResNet-50 training step, batch {args.batch}, {args.size}x{args.size}, fp16 NHWC, "
          f"f32 master weights, {where}, PyTorch {theirs['torch']}"
          + (f", PyTorch's cuDNN {theirs['cudnn']}" if "cudnn" in theirs else "")
          + f"; dnnx {fresh['backend']}")
    print()
    print("| | step (ms, median of rounds) | images/s | first step (s) | first step, second "
          "process (s) | peak allocated (MiB) | peak reserved (MiB) | steady peak allocated "
          "(MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| PyTorch (channels_last, AMP, cudnn.benchmark, fused SGD) | {theirs_ms:.2f} | "
          f"{theirs_rate:.0f} | {theirs['first_step_s']:.2f} | "
          f"{theirs['fresh_process_first_step_s']:.2f} (no cache: searches again) | "
          f"{mib(theirs.get('peak_bytes_in_use'))} | {mib(theirs.get('peak_bytes_reserved'))} | "
          f"{mib(theirs.get('steady_peak_bytes_in_use'))} |")
    print(f"| dnnx::nn ({args.policy}, choice cache) | {ours_ms:.2f} | {ours_rate:.0f} | "
          f"{fresh['first_step_s']:.2f} | {cached['first_step_s']:.2f} | "
          f"{mib(fresh.get('peak_bytes_in_use'))} | {mib(fresh.get('peak_bytes_reserved'))} | "
          f"{mib(fresh.get('steady_peak_bytes_in_use'))} |")
    print()
    ratio = ours_rate / theirs_rate
    cache_ratio = cached["first_step_s"] / fresh["first_step_s"]
    print(f"dnnx / PyTorch images/s: {ratio:.3f} (target >= 1.10); dnnx second-process first "
          f"step / first step: {cache_ratio:.3f} (target <= 0.05); last losses: dnnx "
          f"{fresh['last_loss']:.4f} / {cached['last_loss']:.4f}, PyTorch "
          f"{theirs['last_loss']:.4f}")
    if "host_ms" in theirs and "host_ms" in cached:
        print(f"host time to queue one step (median of {args.steps} single steps, ms): dnnx "
              f"{median(cached['host_ms']):.2f}, PyTorch {median(theirs['host_ms']):.2f}")
    if args.graph:
        if cached.get("graph_error"):
            print(f"dnnx step not captured: {cached['graph_error']}")
        elif cached.get("graph_step_ms") and theirs.get("graph_step_ms"):
            ours_g, theirs_g = median(cached["graph_step_ms"]), median(theirs["graph_step_ms"])
            print(f"captured into a CUDA graph (ms, median of rounds): dnnx {ours_g:.2f}, "
                  f"PyTorch {theirs_g:.2f} (static loss scale); dnnx / PyTorch images/s "
                  f"{theirs_g / ours_g:.3f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"batch": args.batch, "lr": args.lr, "size": args.size, "steps": args.steps,
                       "rounds": args.rounds, "device": where, "dnnx_fresh": fresh,
                       "dnnx_cached": cached, "torch": theirs,
                       "images_per_s": {"dnnx": ours_rate, "torch": theirs_rate},
                       "dnnx_over_torch": ratio, "cached_first_step_ratio": cache_ratio},
                      out, indent=1)


if __name__ == "__main__":
    main()
