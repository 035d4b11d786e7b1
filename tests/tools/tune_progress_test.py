#!/usr/bin/env python3
"""`dnnx tune --json FILE` keeps FILE up to date while it runs: after each layer-direction but the
last the file holds the document so far with `"complete": false` (written beside it and renamed
over it, so never half written), so a run that is cut short keeps what it measured; the finished
run's document says `"complete": true`, and `dnnx report` draws a partial document with a line
saying it is incomplete.

    tune_progress_test.py DNNX WORKDIR

Exit status 0: passed; 1: failed (the reason on stderr)."""

import json
import os
import signal
import subprocess
import sys
import time

LAYERS = ["conv1", "l1.conv3x3"]
STEPS = 3 * len(LAYERS)


def tune(dnnx, json_path, batch):
    return [dnnx, "tune", "--model", "resnet50", "--layers", ",".join(LAYERS), "--batch",
            str(batch), "--backend", "reference", "--runs", "1", "--warmup", "0",
            "--json", json_path]


def read(path):
    """The document in `path`, or None while it is missing or being written."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main(dnnx, work):
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, DNNX_CACHE="off")
    partial = os.path.join(work, "partial.json")
    if os.path.exists(partial):
        os.remove(partial)
    # Cut short: killed once the file holds a partial document.
    process = subprocess.Popen(tune(dnnx, partial, 8), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    seen = None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        document = read(partial)
        if document is not None and document.get("complete") is False and document["results"]:
            seen = document
            break
        time.sleep(0.005)
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait()
    if seen is None:
        print(f"no partial document appeared in {partial} before the tune ended "
              f"(exit status {process.returncode})", file=sys.stderr)
        return 1
    kept = read(partial)
    if kept is None or kept.get("complete") is not False:
        print(f"after the kill {partial} holds no partial document: {kept!r:.300}",
              file=sys.stderr)
        return 1
    if not 1 <= len(kept["results"]) < STEPS:
        print(f"a partial document with {len(kept['results'])} of {STEPS} steps", file=sys.stderr)
        return 1
    first = kept["results"][0]
    if (first["layer"], first["direction"]) != ("conv1", "fwd") or not first["chosen"]["id"]:
        print(f"the partial document's first step is {first!r:.300}", file=sys.stderr)
        return 1
    report = os.path.join(work, "partial.html")
    done = subprocess.run([dnnx, "report", partial, "--out", report], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        print(f"dnnx report of the partial document failed: {done.stderr}", file=sys.stderr)
        return 1
    with open(report) as f:
        if "incomplete: the tune stopped" not in f.read():
            print("the report of a partial document does not say it is incomplete",
                  file=sys.stderr)
            return 1

    # Run to its end: every step, `"complete": true`, and a report without the line.
    whole = os.path.join(work, "whole.json")
    done = subprocess.run(tune(dnnx, whole, 1), env=env, capture_output=True, text=True)
    document = read(whole)
    if done.returncode != 0 or document is None:
        print(f"the whole tune failed ({done.returncode}): {done.stderr}", file=sys.stderr)
        return 1
    if os.path.exists(whole + ".partial"):
        print(f"{whole}.partial, where the partial documents are written first, was left behind",
              file=sys.stderr)
        return 1
    if document.get("complete") is not True or len(document["results"]) != STEPS:
        print(f"the finished document: complete={document.get('complete')!r}, "
              f"{len(document['results'])} of {STEPS} steps", file=sys.stderr)
        return 1
    done = subprocess.run([dnnx, "report", whole, "--out", report], env=env,
                          capture_output=True, text=True)
    with open(report) as f:
        if done.returncode != 0 or "incomplete" in f.read():
            print("the report of the finished document says it is incomplete, or failed",
                  file=sys.stderr)
            return 1
    print(f"tune --json: a partial document of {len(kept['results'])} of {STEPS} steps kept, "
          f"the finished one complete")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
