#!/usr/bin/env python3
"""dnnx's torch.nn.init helpers and dropout against PyTorch.

    torch_init_parity.py INIT_HARNESS

init_harness prints dnnx's gains, fans, bounds and standard deviations for a table of weight
dims and arguments, the moments of large dnnx initialisations, and dropout's outputs. This
script computes the same with torch.nn.init (calculate_gain, _calculate_fan_in_and_fan_out,
_calculate_correct_fan and the formulas of xavier_* and kaiming_*) and checks: the formulas
agree to 1e-12 relative; each initialisation's empirical mean and std agree with the formula's
within 5 standard errors (and uniform ones stay within their bounds); torch's own
initialisations of the same tensors agree with the same formulas, so both sample one law; dropout
keeps elements at rate 1 - p within 3 sigma and scales them by the f32 1 / (1 - p) that
torch.nn.functional.dropout uses, gives src * 0 for p = 1 (NaN and inf -> NaN) as torch does, and
is the identity in inference.

Exit codes: 0 all agree, 1 a mismatch or a harness failure, 77 torch or numpy missing, 2 bad usage.
"""

import json
import math
import subprocess
import sys

import oracle_common  # noqa: F401 (exits 77 without torch / numpy)
from oracle_common import F, torch

init = torch.nn.init


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    result = subprocess.run([sys.argv[1]], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"init_harness failed: {result.stderr.strip()}", file=sys.stderr)
        return 1
    got = json.loads(result.stdout)
    failures = []

    def close(what, a, b, rel=1e-12):
        if not math.isclose(a, b, rel_tol=rel, abs_tol=0.0):
            failures.append(f"{what}: dnnx {a!r}, torch {b!r}")

    for name, gain in got["gain"].items():
        close(f"gain {name}", gain, init.calculate_gain(name))
    for slope, gain in got["leaky_gain"]:
        close(f"gain leaky_relu {slope}", gain, init.calculate_gain("leaky_relu", slope))

    for entry in got["weights"]:
        w = torch.empty(entry["dims"])
        fan_in, fan_out = init._calculate_fan_in_and_fan_out(w)
        close(f"fan_in {entry['dims']}", entry["fan_in"], fan_in)
        close(f"fan_out {entry['dims']}", entry["fan_out"], fan_out)
        for gain, bound in entry["xavier_uniform"]:
            std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
            close(f"xavier_uniform {entry['dims']} gain {gain}", bound, math.sqrt(3.0) * std)
        for gain, std in entry["xavier_normal"]:
            close(f"xavier_normal {entry['dims']} gain {gain}", std,
                  gain * math.sqrt(2.0 / float(fan_in + fan_out)))
        for mode, nonlinearity, a, bound, std in entry["kaiming"]:
            fan = init._calculate_correct_fan(w, mode)
            want = init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
            close(f"kaiming std {entry['dims']} {mode} {nonlinearity} a={a}", std, want)
            close(f"kaiming bound {entry['dims']} {mode} {nonlinearity} a={a}", bound,
                  math.sqrt(3.0) * want)

    # Empirical moments of dnnx's draws and of torch's own, against the formulas.
    shape = [512, 256, 3, 3]
    fan_in, fan_out = 256 * 9, 512 * 9
    laws = {
        "kaiming_uniform_sqrt5": ("uniform", math.sqrt(3.0) * init.calculate_gain(
            "leaky_relu", math.sqrt(5.0)) / math.sqrt(fan_in), 0.0,
            lambda t: init.kaiming_uniform_(t, a=math.sqrt(5.0))),
        "kaiming_normal_fan_out_relu": ("normal", math.sqrt(2.0) / math.sqrt(fan_out), 0.0,
                                        lambda t: init.kaiming_normal_(t, mode="fan_out",
                                                                       nonlinearity="relu")),
        "xavier_uniform_gain2": ("uniform", 2.0 * math.sqrt(6.0 / (fan_in + fan_out)), 0.0,
                                 lambda t: init.xavier_uniform_(t, gain=2.0)),
        "xavier_normal": ("normal", math.sqrt(2.0 / (fan_in + fan_out)), 0.0,
                          lambda t: init.xavier_normal_(t)),
        "uniform": ("range", (-0.5, 0.25), None, lambda t: init.uniform_(t, -0.5, 0.25)),
        "normal": ("normal", 0.5, 1.0, lambda t: init.normal_(t, 1.0, 0.5)),
        "trunc_normal_002": ("trunc", (0.02, -0.04, 0.04), 0.0,
                             lambda t: init.trunc_normal_(t, 0.0, 0.02, -0.04, 0.04)),
    }
    torch.manual_seed(0)
    for name, (kind, param, mean, torch_init) in laws.items():
        if kind == "uniform":
            lo, hi, mean = -param, param, 0.0
            std = param / math.sqrt(3.0)
        elif kind == "range":
            lo, hi = param
            mean, std = (lo + hi) / 2, (hi - lo) / math.sqrt(12.0)
        elif kind == "normal":
            lo, hi, std = -math.inf, math.inf, param
        else:  # truncated normal at +-2 std: mean 0, std 0.8796 of the parent's
            s, lo, hi = param
            std = s * math.sqrt(1 - 2 * 2 * math.exp(-2) / math.sqrt(2 * math.pi) /
                                math.erf(2 / math.sqrt(2)))
        t = torch.empty(shape)
        torch_init(t)
        for who, m in (("dnnx", got["empirical"][name]),
                       ("torch", {"n": t.numel(), "mean": t.double().mean().item(),
                                  "std": t.double().std().item(), "min": t.min().item(),
                                  "max": t.max().item()})):
            n = m["n"]
            if abs(m["mean"] - mean) > 5 * std / math.sqrt(n):
                failures.append(f"{who} {name}: mean {m['mean']}, law {mean} +- {std}/sqrt(n)")
            if abs(m["std"] - std) > 5 * std / math.sqrt(2 * n) + 1e-3 * std:
                failures.append(f"{who} {name}: std {m['std']}, law {std}")
            if m["min"] < lo or m["max"] > hi:
                failures.append(f"{who} {name}: range [{m['min']}, {m['max']}] outside "
                                f"[{lo}, {hi}]")

    # Dropout: rate, scale (torch's f32 1 / (1 - p)), p = 1 and inference.
    for entry in got["dropout"]:
        p, n, kept = entry["p"], entry["n"], entry["kept"]
        if abs(kept - n * (1 - p)) > 3 * math.sqrt(n * p * (1 - p)):
            failures.append(f"dropout p={p}: kept {kept} of {n}")
        ones = torch.ones(4096)
        torch_values = sorted(set(F.dropout(ones, p=p, training=True).tolist()) - {0.0})
        if entry["values"] != torch_values:
            failures.append(f"dropout p={p}: kept values {entry['values']}, torch's "
                            f"{torch_values}")

    def spelled(values):
        return ["nan" if math.isnan(v) else ("inf" if math.isinf(v) and v > 0 else v)
                for v in values]

    special = torch.tensor([1.0, -2.0, math.nan, math.inf, 0.0, 3.0])
    for entry in got["dropout_special"]:
        want = spelled(F.dropout(special, p=entry["p"], training=True).tolist())
        if entry["values"] != want:
            failures.append(f"dropout p={entry['p']} on special values: {entry['values']}, "
                            f"torch's {want}")
    for entry in got["dropout_eval"]:
        want = spelled(F.dropout(special, p=entry["p"], training=False).tolist())
        if entry["values"] != want:
            failures.append(f"dropout eval p={entry['p']}: {entry['values']}, torch's {want}")

    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"torch_init_parity: {len(failures)} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
