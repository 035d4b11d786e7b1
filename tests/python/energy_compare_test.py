#!/usr/bin/env python3
"""bench/energy_compare.py on made-up `dnnx tune --policy min_energy --json` documents: the
fastest measured contender against the chosen one per step, how often they differ, the energy
saved and the time it costs weighted by each layer's count, steps without a measurement listed,
and exit status 1 for a document with none (a machine without an energy counter)."""

import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "bench", "energy_compare.py")


def step(layer, count, chosen, rows, meter="nvml: test", spread=0.0):
    return {"layer": layer, "direction": "fwd", "count": count, "error": None,
            "chosen": {"id": chosen, "time_ms": dict((r[0], r[1]) for r in rows)[chosen],
                       "energy_j": dict((r[0], r[2]) for r in rows)[chosen]},
            "energy_meter": meter,
            "energy_rows": [{"id": i, "time_ms": t, "energy_j": e, "energy_spread_j": spread}
                            for i, t, e in rows]}


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    work = tempfile.mkdtemp(prefix="energy-compare-")
    document = {"model": "m", "batch": 8, "dtype": "f16", "layout": "nhwc", "backend": "cudnn",
                "options": {"fwd": "min_energy"},
                "results": [
                    # differs: 2 mJ -> 1.5 mJ (-25%), 1.0 -> 1.2 ms (+20%), count 2
                    step("a", 2, "lean", [("fast", 1.0, 2e-3), ("lean", 1.2, 1.5e-3)]),
                    # the same candidate, count 1
                    step("b", 1, "fast", [("fast", 0.5, 1e-3), ("other", 0.6, 1.2e-3)]),
                    # not measured
                    {"layer": "c", "direction": "fwd", "count": 1, "error": None,
                     "chosen": {"id": "x", "time_ms": 1.0, "energy_j": None},
                     "energy_meter": "no counter", "energy_rows": []},
                ]}
    path = os.path.join(work, "tune.json")
    with open(path, "w") as f:
        json.dump(document, f)
    out = os.path.join(work, "out.json")
    done = run(path, "--rows", "--json", out)
    assert done.returncode == 0, done.stderr
    with open(out) as f:
        figures = json.load(f)[path]
    total = figures["total"]
    assert total["steps"] == 2 and total["differ"] == 1, total
    # energy: fastest 2*2 + 1*1 = 5 mJ, chosen 2*1.5 + 1*1 = 4 mJ -> 20% saved
    assert abs(total["fastest_j"] - 5e-3) < 1e-12 and abs(total["chosen_j"] - 4e-3) < 1e-12, total
    assert abs(total["saved"] - 0.2) < 1e-9, total
    # time: fastest 2*1.0 + 0.5 = 2.5 ms, chosen 2*1.2 + 0.5 = 2.9 ms -> +16%
    assert abs(total["time_cost"] - 0.16) < 1e-9, total
    assert total["unmeasured"] == ["c fwd: no counter"], total
    a = figures["rows"][0]
    assert a["differ"] and abs(a["saved"] - 0.25) < 1e-9 and abs(a["time_cost"] - 0.2) < 1e-9, a
    assert "| a | fwd | 2 | fast |" in done.stdout and "-25.0%" in done.stdout, done.stdout
    assert "not measured: c fwd: no counter" in done.stdout, done.stdout

    # --beyond-spread: a saving within the larger spread keeps the fastest (d), one beyond it
    # stands (a: 0.5 mJ saved, spreads of 0.1 mJ).
    beyond = dict(document)
    beyond["results"] = [step("a", 2, "lean", [("fast", 1.0, 2e-3), ("lean", 1.2, 1.5e-3)],
                              spread=1e-4),
                         step("d", 1, "lean", [("fast", 1.0, 2e-3), ("lean", 1.2, 1.95e-3)],
                              spread=1e-4)]
    with open(path, "w") as f:
        json.dump(beyond, f)
    done = run(path, "--beyond-spread", "--json", out)
    assert done.returncode == 0, done.stderr
    with open(out) as f:
        rows = json.load(f)[path]["rows"]
    assert [r["chosen"] for r in rows] == ["lean", "fast"], rows
    assert not rows[1]["differ"] and rows[1]["saved"] == 0, rows
    # --as energy_delay: energy x time. a: fast 2 mJ x 1.0 = 2.0 against lean 1.5 x 1.2 = 1.8,
    # beyond the noise (0.1 mJ x 1.2 ms): lean; d: 1.95 x 1.2 = 2.34, more: fast.
    done = run(path, "--as", "energy_delay", "--json", out)
    assert done.returncode == 0 and "taken again as energy_delay" in done.stdout, done
    with open(out) as f:
        assert [r["chosen"] for r in json.load(f)[path]["rows"]] == ["lean", "fast"]
    beyond["results"][0] = step("a", 2, "lean", [("fast", 1.0, 2e-3), ("lean", 1.4, 1.5e-3)],
                                spread=1e-4)  # 1.5 x 1.4 = 2.1: more than fast's 2.0
    with open(path, "w") as f:
        json.dump(beyond, f)
    done = run(path, "--as", "energy_delay", "--json", out)
    with open(out) as f:
        assert [r["chosen"] for r in json.load(f)[path]["rows"]] == ["fast", "fast"]
    done = run(path, "--as", "min_energy", "--json", out)
    with open(out) as f:
        assert [r["chosen"] for r in json.load(f)[path]["rows"]] == ["lean", "fast"]
    # Without the option the document's own choices stand.
    done = run(path, "--json", out)
    with open(out) as f:
        assert [r["chosen"] for r in json.load(f)[path]["rows"]] == ["lean", "lean"]

    # A gzipped document reads the same; a partial one (a tune stopped early) says so.
    with open(path, "w") as f:
        json.dump(beyond, f)
    plain = run(path, "--rows")
    with gzip.open(path + ".gz", "wt") as f:
        json.dump(dict(beyond, complete=False), f)
    zipped = run(path + ".gz", "--rows")
    assert zipped.returncode == 0, zipped.stderr
    assert "(incomplete: the tune stopped after 2 layer-directions)" in zipped.stdout, zipped.stdout
    assert zipped.stdout.split("\n", 3)[3] == plain.stdout.split("\n", 3)[3], zipped.stdout

    # energy_fastest names what exhaustive keeps (host_tie: a lighter candidate within 2% of a
    # host_heavy one): a choice of it is no difference. Without the field the rule is applied to
    # the rows, host_heavy read from the ids (cuDNN's legacy calls, wrapped or not), with the
    # document's host_tie.
    legacy = "cudnn:padc:cudnn:legacy:fwd:algo_1"
    for fastest, host_tie, engine_ms, expected in (
            ("cudnn:engine:1", 0.02, 1.0, "cudnn:engine:1"),  # named
            (None, 0.02, 1.0, "cudnn:engine:1"),  # within 2% of the legacy call
            (None, 0.02, 1.05, legacy),  # beyond it
            (None, 0, 1.0, legacy)):  # rule off
        tie = dict(document, options={"fwd": "min_energy", "host_tie": host_tie})
        tie["results"] = [step("t", 1, "cudnn:engine:1",
                               [(legacy, 0.99, 2e-3), ("cudnn:engine:1", engine_ms, 2e-3)])]
        if fastest:
            tie["results"][0]["energy_fastest"] = fastest
        with open(path, "w") as f:
            json.dump(tie, f)
        done = run(path, "--json", out)
        assert done.returncode == 0, done.stderr
        with open(out) as f:
            row = json.load(f)[path]["rows"][0]
        assert row["fastest"] == expected, (fastest, host_tie, engine_ms, row)
        assert row["differ"] is (expected != "cudnn:engine:1"), row

    # --join: a stopped tune and one of the layers it did not reach give one table, the totals
    # those of both parts' steps; parts of different tunes, or repeating a layer-direction, are
    # refused (exit status 2) naming the file and what differs.
    first = dict(document, complete=False, results=document["results"][:1])
    rest = dict(document, results=document["results"][1:2])
    part_paths = [os.path.join(work, "part1.json"), os.path.join(work, "part2.json.gz")]
    with open(part_paths[0], "w") as f:
        json.dump(first, f)
    with gzip.open(part_paths[1], "wt") as f:
        json.dump(rest, f)
    done = run(*part_paths, "--join", "--json", out)
    assert done.returncode == 0, done.stderr
    assert "(joined from 2 tunes)" in done.stdout and "incomplete" not in done.stdout, done.stdout
    with open(out) as f:
        joined = json.load(f)
    assert list(joined) == [" + ".join(part_paths)], joined
    total = joined[" + ".join(part_paths)]["total"]
    assert total["steps"] == 2 and total["differ"] == 1, total
    assert abs(total["fastest_j"] - 5e-3) < 1e-12 and abs(total["chosen_j"] - 4e-3) < 1e-12, total
    separate = run(*part_paths, "--json", out)  # without --join: a table per file
    assert separate.returncode == 0 and separate.stdout.count("### ") == 2, separate.stdout
    for other, says in ((dict(rest, dtype="f32"), "dtype 'f32'"),
                        (dict(rest, options={"fwd": "energy_delay"}), "option fwd"),
                        (dict(first, complete=True), "a fwd is in")):
        with open(part_paths[0].replace("part1", "other"), "w") as f:
            json.dump(other, f)
        done = run(part_paths[0], part_paths[0].replace("part1", "other"), "--join")
        assert done.returncode == 2 and says in done.stderr, (says, done.returncode, done.stderr)

    # Nothing measured at all: exit status 1, saying why per step.
    document["results"] = document["results"][2:]
    with open(path, "w") as f:
        json.dump(document, f)
    done = run(path)
    assert done.returncode == 1 and "no counter" in done.stdout, (done.returncode, done.stdout)
    # Not JSON: exit status 2 naming the file.
    with open(path, "w") as f:
        f.write("not json")
    done = run(path)
    assert done.returncode == 2 and path in done.stderr, (done.returncode, done.stderr)
    print("energy_compare.py: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
