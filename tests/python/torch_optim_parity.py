#!/usr/bin/env python3
"""dnnx's reference optimizers and loss scaler against PyTorch (the oracle of the oracle).

    torch_optim_parity.py OPTIM_HARNESS [--keep DIR] [--case SUBSTRING]

Optimizers: for every case below, numpy draws float32 parameters and ten steps of gradients;
optim_harness runs sgd_step / adam_step on dnnx's reference backend, and torch.optim.SGD, Adam or
AdamW (torch's own single-tensor code, in float32) take the same ten steps from the same state.
A step marked found_inf is skipped by torch (GradScaler.step does not call optimizer.step) and
passed found_inf = 1 in dnnx, which must skip it on its own; with a grad scale dnnx is given the
gradients times the scale (a power of two: exact) and divides them inside the step. Every
parameter, state tensor and the step count must agree within 1e-6 relative: |dnnx - torch| <=
1e-6 * max(|torch|, magnitude), the magnitude being that of the terms the element was formed
from (class Magnitudes: where ten steps of exponential averaging cancel a moment to near zero,
torch's own f32 roundings are of the size of the terms that cancelled, not of the result). A bf16 case with f32 master weights compares the master copy with torch's
f32 parameters (torch given the bf16-rounded gradients) and the bf16 parameter with the master
rounded to bf16.

Loss scaler: Debian's CPU torch 1.13 has no CPU kernels for torch._amp_foreach_non_finite_check_
and_unscale_ and torch._amp_update_scale_ (they are CUDA-only there), so this script implements
their documented algorithm (aten/src/ATen/native/cuda/AmpKernels.cu and GradScaler.unscale_ in
torch/cuda/amp/grad_scaler.py: inv_scale = float(1 / double(scale)), grads *= inv_scale in float32
then rounded to the grads' dtype, found_inf = 1 on any inf/NaN; the update's backoff, growth
tracker and growth with a finiteness check) in numpy and compares dnnx's GradScaler over a
sequence of steps with planted infs and NaNs, exactly.

Exit codes: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or numpy missing
(ctest reports SKIP), 2 bad usage.
"""

import os
import sys

import oracle_common
from oracle_common import np, torch

SHAPES = [[7], [3, 5], [0], [1], [2, 3, 4], [300]]
STEPS = 10


def sgd(name, lr=0.1, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
        maximize=False, found=None, grad_scale=0.0):
    return {"name": name, "op": "sgd", "lr": lr, "momentum_value": momentum,
            "momentum": momentum != 0, "dampening": dampening, "weight_decay": weight_decay,
            "nesterov": nesterov, "maximize": maximize, "found_inf": found or [0] * STEPS,
            "grad_scale": grad_scale, "dtype": "f32", "master": False}


def adam(name, lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
         decoupled=False, maximize=False, found=None, grad_scale=0.0, dtype="f32", master=False):
    return {"name": name, "op": "adam", "lr": lr, "beta1": betas[0], "beta2": betas[1],
            "eps": eps, "weight_decay": weight_decay, "amsgrad": amsgrad, "decoupled": decoupled,
            "maximize": maximize, "found_inf": found or [0] * STEPS, "grad_scale": grad_scale,
            "dtype": dtype, "master": master}


SKIPS = [1, 0, 0, 1, 0, 0, 0, 1, 0, 0]
CASES = [
    sgd("sgd_plain"),
    sgd("sgd_momentum_dampening_decay", lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    sgd("sgd_nesterov_maximize", lr=0.05, momentum=0.8, weight_decay=0.02, nesterov=True,
        maximize=True),
    sgd("sgd_momentum_skips_scaled", lr=0.05, momentum=0.9, found=SKIPS, grad_scale=1024.0),
    adam("adam_plain"),
    adam("adam_amsgrad_decay_maximize", betas=(0.8, 0.95), eps=1e-6, weight_decay=0.05,
         amsgrad=True, maximize=True),
    adam("adamw", weight_decay=0.1, decoupled=True),
    adam("adamw_amsgrad", lr=0.003, weight_decay=0.01, amsgrad=True, decoupled=True),
    adam("adam_skips_scaled", found=SKIPS, grad_scale=65536.0, weight_decay=0.01),
    adam("adamw_bf16_master", weight_decay=0.01, decoupled=True, dtype="bf16", master=True),
    {"name": "scaler_f32", "op": "scaler", "dtype": "f32", "init_scale": 1024.0,
     "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3},
    {"name": "scaler_f16_odd_factors", "op": "scaler", "dtype": "f16", "init_scale": 3.0,
     "growth_factor": 1.5, "backoff_factor": 0.25, "growth_interval": 2},
]


def bf16_round(array):
    """float32 -> bfloat16 (round to nearest even) -> float32."""
    return torch.tensor(array, dtype=torch.float32).to(torch.bfloat16).to(torch.float32).numpy()


def torch_optimizer(c, params):
    if c["op"] == "sgd":
        return torch.optim.SGD(params, lr=c["lr"], momentum=c["momentum_value"],
                               dampening=c["dampening"], weight_decay=c["weight_decay"],
                               nesterov=c["nesterov"], maximize=c["maximize"])
    kind = torch.optim.AdamW if c["decoupled"] else torch.optim.Adam
    return kind(params, lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                weight_decay=c["weight_decay"], amsgrad=c["amsgrad"], maximize=c["maximize"])


def close(name, got, want, magnitude):
    """1e-6 relative to the larger of the element and the magnitude of the terms that formed it."""
    want = np.asarray(want, dtype=np.float64)
    return oracle_common.compare(name, got, want, 1e-6 * np.maximum(np.abs(want), magnitude))


class Magnitudes:
    """Per element, in float64, the size of the terms a step sums: for the momentum buffer or
    exp_avg the same exponential average taken over |g| (+ weight_decay * |p| where the decay goes
    into the gradient), for a parameter the largest |p| it had. Where ten steps of averaging
    cancel a moment to near zero, torch's own f32 roundings are of the size of these terms, not of
    the result; exp_avg_sq and max_exp_avg_sq sum positive terms and are held to themselves."""

    def __init__(self, c, params):
        self.c = c
        self.moment = [np.zeros(p.shape) for p in params]
        self.param = [np.abs(p.astype(np.float64)) for p in params]
        self.steps = 0

    def step(self, params, grads):
        c = self.c
        decay_in_grad = c["op"] == "sgd" or not c["decoupled"]
        for i, (p, g) in enumerate(zip(params, grads)):
            p = np.abs(p.detach().numpy().astype(np.float64))
            term = np.abs(g.astype(np.float64)) + (c["weight_decay"] * p if decay_in_grad else 0)
            if c["op"] == "sgd":
                self.moment[i] = term if self.steps == 0 else (
                    c["momentum_value"] * self.moment[i] + (1 - c["dampening"]) * term)
            else:
                self.moment[i] = c["beta1"] * self.moment[i] + (1 - c["beta1"]) * term
        self.steps += 1

    def after(self, params):
        for i, p in enumerate(params):
            self.param[i] = np.maximum(self.param[i], np.abs(p.detach().numpy()))


def run_optimizer(harness, c, directory, rng):
    params = [rng.uniform(-1, 1, s).astype(np.float32) for s in SHAPES]
    grads = [[rng.uniform(-1, 1, s).astype(np.float32) for s in SHAPES] for _ in range(STEPS)]
    if c["dtype"] == "bf16":
        params = [bf16_round(p) for p in params]
        grads = [[bf16_round(g) for g in step] for step in grads]
    case = dict(c, shapes=SHAPES, steps=STEPS)
    arrays = {f"param_{i}": p for i, p in enumerate(params)}
    scale = c["grad_scale"] or 1.0
    for s, step in enumerate(grads):
        for i, g in enumerate(step):
            arrays[f"grad_{s}_{i}"] = (g * np.float32(scale)).astype(np.float32)
    failure = oracle_common.run_harness(harness, directory, case, arrays)
    if failure:
        return False, [failure]

    tensors = [torch.tensor(p, dtype=torch.float32, requires_grad=True) for p in params]
    optimizer = torch_optimizer(c, tensors)
    magnitudes = Magnitudes(c, params)
    runs = 0
    for s in range(STEPS):
        if c["found_inf"][s]:
            continue
        for t, g in zip(tensors, grads[s]):
            t.grad = torch.tensor(g)
        magnitudes.step(tensors, grads[s])
        optimizer.step()
        magnitudes.after(tensors)
        runs += 1

    ok, messages = True, []

    def check(name, got_file, want, magnitude=0.0):
        nonlocal ok
        good, message = close(name, oracle_common.load_output(directory, got_file), want,
                               magnitude)
        ok = ok and good
        if not good or name.endswith("_0"):
            messages.append(message)

    for i, t in enumerate(tensors):
        want = t.detach().numpy()
        if c["master"]:
            check(f"master_{i}", f"master_{i}", want, magnitudes.param[i])
            got = oracle_common.load_output(directory, f"param_{i}")
            master = oracle_common.load_output(directory, f"master_{i}")
            if not np.array_equal(got, bf16_round(master)):
                ok = False
                messages.append(f"param_{i}: not the master copy rounded to bf16")
        else:
            check(f"param_{i}", f"param_{i}", want, magnitudes.param[i])
        state = optimizer.state[t]
        if c["op"] == "sgd":
            if c["momentum"] and "momentum_buffer" in state:
                check(f"buf_{i}", f"buf_{i}", state["momentum_buffer"].numpy(),
                      magnitudes.moment[i])
        else:
            check(f"exp_avg_{i}", f"exp_avg_{i}", state["exp_avg"].numpy(), magnitudes.moment[i])
            check(f"exp_avg_sq_{i}", f"exp_avg_sq_{i}", state["exp_avg_sq"].numpy())
            if c["amsgrad"]:
                check(f"max_exp_avg_sq_{i}", f"max_exp_avg_sq_{i}",
                      state["max_exp_avg_sq"].numpy())
    step = float(oracle_common.load_output(directory, "step")[0])
    if step != runs:
        ok = False
        messages.append(f"step: dnnx counted {step}, torch took {runs} steps")
    else:
        messages.append(f"step: {runs} of {STEPS} taken")
    return ok, messages


def to_dtype(array, dtype):
    """float32 values rounded to the grads' dtype and back."""
    if dtype == "f16":
        return array.astype(np.float16).astype(np.float32)
    return array.astype(np.float32)


def torch_scaler(c, steps):
    """torch's GradScaler.unscale_ + update on every step (its documented algorithm): per step the
    unscaled grads, found_inf, the scale and the growth tracker after the update."""
    scale, tracker = np.float32(c["init_scale"]), 0
    out = []
    for grads in steps:
        inv_scale = np.float32(1.0 / np.float64(scale))
        found = 0.0
        unscaled = []
        for g in grads:
            if not np.all(np.isfinite(g)):
                found = 1.0
            with np.errstate(invalid="ignore", over="ignore"):
                product = g if inv_scale == 1 else (g * inv_scale).astype(np.float32)
            unscaled.append(to_dtype(product, c["dtype"]))
        if found:
            scale = np.float32(np.float64(scale) * c["backoff_factor"])
            tracker = 0
        else:
            successful = tracker + 1
            if successful == c["growth_interval"]:
                grown = np.float32(np.float64(scale) * c["growth_factor"])
                if np.isfinite(grown):
                    scale = grown
                tracker = 0
            else:
                tracker = successful
        out.append((unscaled, found, scale, tracker))
    return out


def run_scaler(harness, c, directory, rng):
    steps = 9
    poisoned = {2: np.inf, 3: np.nan, 7: -np.inf}
    grads = []
    for s in range(steps):
        step = [to_dtype(rng.uniform(-8, 8, shape).astype(np.float32), c["dtype"])
                for shape in SHAPES]
        if s in poisoned:
            step[4].reshape(-1)[5] = poisoned[s]
        grads.append(step)
    case = dict(c, shapes=SHAPES, steps=steps)
    arrays = {f"grad_{s}_{i}": g for s, step in enumerate(grads) for i, g in enumerate(step)}
    failure = oracle_common.run_harness(harness, directory, case, arrays)
    if failure:
        return False, [failure]
    ok, messages = True, []
    for s, (unscaled, found, scale, tracker) in enumerate(torch_scaler(c, grads)):
        load = lambda name: oracle_common.load_output(directory, name)  # noqa: E731
        for i, want in enumerate(unscaled):
            got = load(f"unscaled_{s}_{i}")
            if not np.array_equal(got, want, equal_nan=True):
                ok = False
                messages.append(f"unscaled_{s}_{i}: differs from torch's algorithm")
        for name, want in ((f"found_inf_{s}", found), (f"scale_{s}", scale),
                           (f"tracker_{s}", tracker)):
            got = float(load(name)[0])
            if got != float(want):
                ok = False
                messages.append(f"{name}: dnnx {got}, torch's algorithm {float(want)}")
    messages.append(f"{steps} steps, {len(poisoned)} with non-finite gradients"
                    + ("" if ok else ": MISMATCH"))
    return ok, messages


def run_case(harness, c, name, directory, rng):
    if c["op"] == "scaler":
        return run_scaler(harness, c, directory, rng)
    return run_optimizer(harness, c, directory, rng)


if __name__ == "__main__":
    sys.exit(oracle_common.main(__doc__, "optim_harness", [(c["name"], c, "") for c in CASES],
                                run_case))
