"""`dnnx train` end to end, on the cpu backend (reference where oneDNN is missing).

  determinism  two runs with --seed and DNNX_DETERMINISTIC=1 print bitwise identical losses and
               accuracies; a run resumed from an epoch-1 checkpoint prints the epoch-2 line of an
               uninterrupted run (weights, optimizer state and epoch restored).
  layout       on the reference backend (whose results do not depend on the memory order), a
               --layout nhwc run prints the lines of the --layout nchw run, and its steady rate
               after the first step; a checkpoint saved by an nhwc run (weights and momentum
               buffers in PyTorch's order) resumes in an nchw run as the uninterrupted run goes on.
  learning     a short Fashion-MNIST run (exit 77, a skip, without Debian's dataset-fashion-mnist)
               reaches a test accuracy far above chance (0.1).

Usage: train_runs.py DNNX_BINARY determinism|layout|learning
"""

import os
import re
import subprocess
import sys
import tempfile

dnnx, mode = sys.argv[1], sys.argv[2]
LINE = re.compile(r"^epoch (\d+)/\d+ steps (\d+) loss (\S+) train-acc (\S+) test-acc (\S+) "
                  r"\((\d+)/(\d+)\)")


def backend():
    versions = subprocess.run([dnnx, "version"], capture_output=True, text=True).stdout
    return "reference" if "  cpu: unavailable" in versions else "cpu"


def train(*args, backend_name=None):
    env = dict(os.environ, DNNX_DETERMINISTIC="1")
    command = [dnnx, "train", "--backend", backend_name or backend(), "--progress", "lines",
               *args]
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit(f"FAIL: {' '.join(command)} exited {run.returncode}\n{run.stdout}\n{run.stderr}")
    epochs = [LINE.match(line) for line in run.stdout.splitlines()]
    epochs = [m.groups() for m in epochs if m]
    print(" ".join(command))
    print(run.stdout, end="")
    train.stdout = run.stdout
    return epochs


failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


if mode == "determinism":
    common = ["--model", "fashion-cnn", "--dataset", "synthetic", "--synthetic-size", "384",
              "--synthetic-test-size", "128", "--batch", "64", "--seed", "7"]
    first = train(*common, "--epochs", "2")
    second = train(*common, "--epochs", "2")
    check(len(first) == 2, f"expected 2 epoch lines, got {first}")
    check(first == second, f"two seeded runs differ: {first} vs {second}")
    check(float(first[1][2]) < float(first[0][2]), f"the loss did not fall: {first}")
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = os.path.join(folder, "ck.safetensors")
        adam = [*common, "--optimizer", "adamw", "--weight-decay", "0.01"]
        straight = train(*adam, "--epochs", "2")
        train(*adam, "--epochs", "1", "--save", checkpoint)
        check(os.path.exists(os.path.join(folder, "ck.optimizer.safetensors")),
              "no optimizer file beside the checkpoint")
        resumed = train(*adam, "--epochs", "2", "--resume", checkpoint)
        check(len(resumed) == 1 and len(straight) == 2 and resumed[0] == straight[1],
              f"the resumed epoch 2 {resumed} differs from the uninterrupted one {straight}")
elif mode == "layout":
    common = ["--model", "fashion-cnn", "--dataset", "synthetic", "--synthetic-size", "128",
              "--synthetic-test-size", "32", "--batch", "32", "--seed", "3"]
    first = train(*common, "--epochs", "2", "--layout", "nchw", backend_name="reference")
    last = train(*common, "--epochs", "2", "--layout", "nhwc", backend_name="reference")
    check(len(first) == 2 and first == last, f"nhwc {last} differs from nchw {first}")
    check(re.search(r"\(first step [0-9.]+ s, after it [0-9]+ images/s\)", train.stdout),
          "no steady rate after the first step in the epoch line")
    check(" nhwc, batch 32" in train.stdout, "the header does not name the layout")
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = os.path.join(folder, "ck.safetensors")
        train(*common, "--epochs", "1", "--layout", "nhwc", "--save", checkpoint,
              backend_name="reference")
        resumed = train(*common, "--epochs", "2", "--layout", "nchw", "--resume", checkpoint,
                        backend_name="reference")
        check(len(resumed) == 1 and resumed[0] == first[1],
              f"the nchw run resumed from an nhwc checkpoint {resumed} differs from the "
              f"uninterrupted one {first}")
elif mode == "learning":
    folder = os.environ.get("DNNX_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
    if not os.path.exists(os.path.join(folder, "train-images-idx3-ubyte.gz")):
        print(f"skip: Fashion-MNIST is not installed in {folder} (dataset-fashion-mnist)")
        sys.exit(77)
    epochs = train("--model", "fashion-cnn", "--dataset", "fashion-mnist", "--batch", "64",
                   "--steps", "120", "--test-limit", "1000", "--seed", "1")
    check(len(epochs) == 1, f"expected one epoch line, got {epochs}")
    accuracy = float(epochs[0][4]) if epochs else 0.0
    # --test-limit evaluates whole batches: at least 1000 images.
    check(epochs and 1000 <= int(epochs[0][6]) < 1064, f"evaluated {epochs}")
    check(accuracy > 0.5, f"test accuracy {accuracy} after 120 steps is not far above chance (0.1)")
else:
    sys.exit(f"unknown mode {mode}")

print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
