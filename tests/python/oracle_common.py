"""What the PyTorch oracle scripts of the layer ops share (torch_pool_parity.py,
torch_activation_parity.py, torch_bnorm_parity.py): importing torch and numpy (exit 77, which
ctest reports as a skip, when either is missing), handing one case to a harness executable
through a directory of case.json and .npy files, comparing an output with torch's within an
elementwise bound, and the command line and loop over the case table.

Exit codes of the scripts: 0 all cases agree, 1 a mismatch or a harness failure, 77 torch or
numpy missing, 2 bad usage.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

try:
    import numpy as np
    import torch
    import torch.nn.functional as F  # noqa: F401 (re-exported for the scripts)
except ImportError as error:  # pragma: no cover - depends on the machine
    print(f"SKIP: the PyTorch oracle needs torch and numpy ({error}); on Debian: "
          "apt-get install python3-torch python3-numpy", file=sys.stderr)
    sys.exit(SKIP)


def run_harness(harness, directory, case, arrays):
    """Writes case.json (the case without its name) and one float32 .npy per entry of `arrays`
    into `directory`, runs `harness directory`; returns None on success, else the failure as
    one line."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "case.json"), "w") as out:
        json.dump({k: v for k, v in case.items() if k != "name"}, out)
    for role, array in arrays.items():
        np.save(os.path.join(directory, role + ".npy"), array)
    result = subprocess.run([harness, directory], capture_output=True, text=True)
    if result.returncode != 0:
        return (f"{os.path.basename(harness)} exited {result.returncode}: "
                f"{result.stderr.strip()}")
    return None


def load_output(directory, name):
    """The harness's output `name`.npy."""
    return np.load(os.path.join(directory, name + ".npy"))


def compare(name, got, want, bound):
    """(ok, message) for one output: finite, of torch's shape, |got - want| <= bound elementwise
    (a bound of 0 asks for exact agreement)."""
    if got.shape != want.shape:
        return False, f"{name}: shape {got.shape} from dnnx, {want.shape} from torch"
    if not np.all(np.isfinite(got)):
        return False, f"{name}: {int((~np.isfinite(got)).sum())} elements are NaN or Inf"
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), want.shape)
    error = np.abs(got.astype(np.float64) - want)
    ratio = np.where(bound > 0, error / np.where(bound > 0, bound, 1), np.where(error > 0, np.inf, 0))
    worst = float(ratio.max()) if ratio.size else 0.0
    bad = int((ratio > 1).sum())
    if bad == 0:
        return True, f"{name}: " + ("exact" if not np.any(bound) else
                                    f"worst {worst:.3f} of the bound")
    at = np.unravel_index(int(ratio.argmax()), ratio.shape)
    return False, (f"{name}: {bad} of {ratio.size} elements outside the bound (worst {worst:.3g}x "
                   f"at {list(at)}: dnnx {got[at]!r}, torch {want[at]!r}, bound {bound[at]!r})")


def main(doc, harness_name, runs, run_one):
    """The command line and loop of an oracle script; returns its exit code.

    doc: the script's docstring (its first line is the description). harness_name: the harness
    executable's name, for --help. runs: every run in order, as (name, case, note) with `name`
    the run's directory and report name, `case` the table row (its "name" is what --case
    matches; printed as JSON on a failure, followed by `note`). run_one(harness, case, name,
    directory, rng) -> (ok, messages) runs one; its rng is seeded 2000 + its index among the runs
    selected.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("harness", help=f"path of the {harness_name} executable")
    parser.add_argument("--keep", help="write the case directories here and keep them")
    parser.add_argument("--case", default="", help="run only cases whose name contains this")
    args = parser.parse_args()
    if not os.access(args.harness, os.X_OK):
        parser.error(f"harness {args.harness!r} is not an executable file")

    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, numpy {np.__version__}")
    root = args.keep or tempfile.mkdtemp(prefix=f"dnnx_torch_{harness_name}_")
    failures = []
    selected = [run for run in runs if args.case in run[1]["name"]]
    for index, (name, case, note) in enumerate(selected):
        rng = np.random.default_rng(2000 + index)
        directory = os.path.join(root, name)
        ok, messages = run_one(args.harness, case, name, directory, rng)
        print(f"{'ok  ' if ok else 'FAIL'} {name}: " + "; ".join(messages))
        if not ok:
            failures.append(name)
            print(f"     case: {json.dumps(case)}{note}\n     rerun: {args.harness} {directory}"
                  + ("" if args.keep else " (pass --keep DIR to keep the inputs)"))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{len(selected) - len(failures)} of {len(selected)} cases agree with torch")
    return 1 if failures else 0
