"""Training steps of torchvision's ResNet-50 converted by dnnx.torch against the same model
unconverted, in the same run: batch 64, AMP f16 (torch.autocast + GradScaler), channels_last,
SGD with momentum (fused where PyTorch has it), cudnn.benchmark=True for PyTorch and exhaustive
selection for dnnx.

    python bench/torch_resnet50.py [--batch 64] [--steps 40] [--warmup 10] [--json FILE]

Each side: the first step's wall time (PyTorch's benchmark search or dnnx's exhaustive selection
inside it), then `warmup` steps, then `steps` steps timed with CUDA events around the loop
(images/s), in turns (PyTorch, dnnx, PyTorch, dnnx, ...) so both meet the same GPU state; besides
the ratio of the medians, the rounds where dnnx was faster and the median of the rounds' own
ratios (a host whose speed drifts between rounds moves both sides of a round alike). Then
the first step of each in a fresh process: PyTorch searches again, dnnx reads its choices from
the choice-cache file the first process wrote (DNNX_CACHE_FILE, a temporary one unless given).
Prints a Markdown table; --json writes the figures.

With --host-tie X, a second converted copy of the model whose context has
TuneOptions::host_tie = X (Note [host cost ties]; 0 turns the rule off) takes its turn in every
round too, and the rounds' ratios of the two converted copies are printed.

With --graphed, each side's step is also captured into a CUDA graph (torch.cuda.graph, after a
warm-up on the capturing stream; a static loss scale instead of GradScaler, whose step reads the
found-inf flag on the host) and replayed: the same work without the host's per-call cost, which
the eager figures include, on both sides (Note [graphed steps]).
"""

import argparse
import contextlib
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torchvision

import dnnx
import dnnx.torch as dt


def make_model(seed=0):
    torch.manual_seed(seed)
    return torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)


def optimizer_for(model):
    try:
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    except (TypeError, RuntimeError):
        return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


class Trainer:
    def __init__(self, model, converted, batch, policy="exhaustive"):
        """`policy`: the converted model's selection in every direction."""
        self.model = model
        self.optimizer = optimizer_for(model)
        self.scaler = torch.amp.GradScaler("cuda")
        self.context = None
        if converted:
            self.context = dnnx.Context("cudnn")
            for direction in ("fwd", "bwd_data", "bwd_weights"):  # bwd is bwd_data
                setattr(self.context.tune, direction, policy)
        gen = torch.Generator(device="cuda").manual_seed(1)
        self.x = torch.randn(batch, 3, 224, 224, device="cuda", generator=gen).contiguous(
            memory_format=torch.channels_last)
        self.labels = torch.randint(0, 1000, (batch,), device="cuda", generator=gen)

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(self.model(self.x), self.labels)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss

    def run(self, steps):
        if self.context is None:
            return self._run(steps)
        with self.context:
            return self._run(steps)

    def _run(self, steps):
        for _ in range(steps):
            loss = self.step()
        return loss

    def first_step_s(self):
        torch.cuda.synchronize()
        start = time.perf_counter()
        loss = self.run(1)
        torch.cuda.synchronize()
        return time.perf_counter() - start, loss.item()

    def timed_ms(self, steps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        self.run(steps)
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / steps


# Note [graphed steps]
# A captured step replays its kernels with no Python, dispatcher or dnnx host work, so the graphed
# figures compare the two sides' GPU work alone, and the eager figures minus the graphed ones are
# each side's host-bound share. GradScaler cannot be captured (its step synchronizes to read
# found_inf), so both sides scale the loss by a constant, multiply the gradients back with one
# foreach kernel and run the same fused SGD: the same extra work on both sides. Gradients are set
# to None before the capture so that the backward allocates them from the graph's pool, as
# PyTorch's whole-network capture recipe does.
class GraphedTrainer:
    scale = 1024.0

    def __init__(self, trainer):
        self.t = trainer
        self.graph = None

    def _step(self):
        t = self.t
        with torch.autocast("cuda", dtype=torch.float16, cache_enabled=False):
            loss = torch.nn.functional.cross_entropy(t.model(t.x), t.labels)
        (loss * self.scale).backward()
        grads = [p.grad for p in t.model.parameters() if p.grad is not None]
        torch._foreach_mul_(grads, 1.0 / self.scale)
        t.optimizer.step()
        return loss

    def capture(self, warmup=3):
        t = self.t
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        ctx = t.context if t.context is not None else contextlib.nullcontext()
        with ctx, torch.cuda.stream(stream):
            for _ in range(warmup):
                t.optimizer.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        t.optimizer.zero_grad(set_to_none=True)
        self.graph = torch.cuda.CUDAGraph()
        with ctx, torch.cuda.graph(self.graph, stream=stream):
            self.loss = self._step()
        torch.cuda.synchronize()

    def timed_ms(self, steps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(steps):
            self.graph.replay()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / steps


def first_step_in_fresh_process(which, batch, cache_file):
    env = dict(os.environ, DNNX_CACHE_FILE=cache_file, DNNX_CACHE="readwrite")
    result = subprocess.run([sys.executable, __file__, "--first-step-only", which, "--batch",
                             str(batch)], env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--first-step-only", choices=["torch", "dnnx"])
    parser.add_argument("--graphed", action="store_true",
                        help="also time each side's step captured into a CUDA graph")
    parser.add_argument("--host-tie", type=float,
                        help="also time a converted copy whose context has this host_tie")
    args = parser.parse_args()

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False

    if args.first_step_only:
        model = make_model()
        converted = args.first_step_only == "dnnx"
        trainer = Trainer(dt.convert(model) if converted else model, converted, args.batch)
        seconds, loss = trainer.first_step_s()
        print(json.dumps({"first_step_s": seconds, "loss": loss}))
        return

    own_cache = "DNNX_CACHE_FILE" not in os.environ
    cache_file = os.environ.get("DNNX_CACHE_FILE") or os.path.join(tempfile.mkdtemp(),
                                                                   "tune.json")
    os.environ["DNNX_CACHE_FILE"] = cache_file
    os.environ["DNNX_CACHE"] = "readwrite"
    if own_cache and os.path.exists(cache_file):
        os.remove(cache_file)

    base = make_model()
    theirs = Trainer(base, False, args.batch)
    ours = Trainer(dt.convert(copy.deepcopy(base)), True, args.batch)
    first = {"torch": theirs.first_step_s(), "dnnx": ours.first_step_s()}
    other = None
    if args.host_tie is not None:
        other = Trainer(dt.convert(copy.deepcopy(base)), True, args.batch)
        other.context.tune.host_tie = args.host_tie
        first["dnnx_host_tie"] = other.first_step_s()
    theirs.run(args.warmup)
    ours.run(args.warmup)
    times = {"torch": [], "dnnx": []}
    if other is not None:
        other.run(args.warmup)
        times["dnnx_host_tie"] = []
    for _ in range(args.rounds):
        times["torch"].append(theirs.timed_ms(args.steps))
        times["dnnx"].append(ours.timed_ms(args.steps))
        if other is not None:
            times["dnnx_host_tie"].append(other.timed_ms(args.steps))
    graphed = {}
    if args.graphed:
        graphs = {"torch": GraphedTrainer(theirs), "dnnx": GraphedTrainer(ours)}
        for g in graphs.values():
            g.capture()
        graphed = {"torch": [], "dnnx": []}
        for _ in range(args.rounds):
            for which, g in graphs.items():
                graphed[which].append(g.timed_ms(args.steps))
        del graphs
    del ours, theirs, other, base
    torch.cuda.empty_cache()
    second = {which: first_step_in_fresh_process(which, args.batch, cache_file)
              for which in ("torch", "dnnx")}

    median = {which: sorted(values)[len(values) // 2] for which, values in times.items()}
    rate = {which: args.batch * 1000.0 / ms for which, ms in median.items()}
    print(f"ResNet-50 training step, batch {args.batch}, AMP f16, channels_last, "
          f"{torch.cuda.get_device_name()}, PyTorch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}")
    print()
    print("| | step (ms, median of rounds) | images/s | first step (s) | first step, "
          "fresh process (s) |")
    print("|---|---:|---:|---:|---:|")
    for which, label in (("torch", "PyTorch (cudnn.benchmark)"),
                         ("dnnx", "dnnx.torch.convert (exhaustive)")):
        print(f"| {label} | {median[which]:.2f} | {rate[which]:.0f} | {first[which][0]:.2f} | "
              f"{second[which]['first_step_s']:.2f} |")
    print()
    print(f"dnnx / PyTorch throughput: {rate['dnnx'] / rate['torch']:.3f}; dnnx fresh-process "
          f"first step / first step: {second['dnnx']['first_step_s'] / first['dnnx'][0]:.3f}")
    # Each round times the two sides back to back, so a round's ratio compares them under the
    # same host conditions, which the host's drift between rounds does not.
    paired = [theirs_ms / ours_ms for theirs_ms, ours_ms in zip(times["torch"], times["dnnx"])]
    print(f"rounds where dnnx was faster: {sum(r > 1 for r in paired)} of {len(paired)}; "
          f"median of the rounds' throughput ratios: {statistics.median(paired):.3f}")
    if "dnnx_host_tie" in times:
        alt = times["dnnx_host_tie"]
        versus = [a / b for a, b in zip(alt, times["dnnx"])]
        print(f"dnnx with host_tie={args.host_tie}: step {sorted(alt)[len(alt) // 2]:.2f} ms "
              f"(median of rounds); its step / the default's: median of the rounds' ratios "
              f"{statistics.median(versus):.3f}, rounds where the default was faster: "
              f"{sum(r > 1 for r in versus)} of {len(versus)}")
    if graphed:
        gmed = {which: sorted(values)[len(values) // 2] for which, values in graphed.items()}
        print()
        print("Captured into a CUDA graph (static loss scale; Note [graphed steps]):")
        print()
        print("| | step (ms, median of rounds) | rounds | images/s |")
        print("|---|---:|---|---:|")
        for which, label in (("torch", "PyTorch, graphed"), ("dnnx", "dnnx.torch, graphed")):
            rounds = ", ".join(f"{v:.2f}" for v in graphed[which])
            print(f"| {label} | {gmed[which]:.2f} | {rounds} | "
                  f"{args.batch * 1000.0 / gmed[which]:.0f} |")
        print()
        print(f"graphed dnnx / PyTorch throughput: {gmed['torch'] / gmed['dnnx']:.3f}; dnnx "
              f"graphed / PyTorch eager: {median['torch'] / gmed['dnnx']:.3f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"batch": args.batch, "device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "step_ms": times, "images_per_s": rate,
                       "paired_ratios": paired,
                       "first_step_s": {k: v[0] for k, v in first.items()},
                       "first_loss": {k: v[1] for k, v in first.items()},
                       "fresh_process_first_step_s": {k: v["first_step_s"]
                                                      for k, v in second.items()},
                       "graphed_step_ms": graphed},
                      out, indent=1)


if __name__ == "__main__":
    main()
