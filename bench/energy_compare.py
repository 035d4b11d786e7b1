#!/usr/bin/env python3
"""Energy per call of the fastest candidate against the energy policy's pick, per layer-direction
and in total, from the documents of `dnnx tune ... --policy min_energy --json FILE` (or
energy_delay): docs/energy.md.

Each step of such a document lists its measured contenders (`energy_rows`: id, time_ms, energy_j,
...) and the one `exhaustive` keeps (`energy_fastest`: the least time, host_tie applied; in
older documents the same rule is applied here, host_heavy read from the ids), the chosen one
what the energy policy keeps. Per file: how often the two differ, the energy the choice saves
(joules x the layer's count, summed) and the time it costs (milliseconds x count, summed).

    energy_compare.py TUNE.json [TUNE.json ...] [--json OUT.json] [--rows] [--beyond-spread]
                      [--as min_energy|energy_delay] [--join]

Reads a TUNE.json.gz through gzip. Prints a markdown table per file (with --rows, a row per
layer-direction too) and the totals; --json writes the same figures. --beyond-spread takes the
pick again from the measured rows by the policy's rule that a contender displaces the fastest
only when it saves more than the larger of the two measurements' spreads (Note [energy
policies] in src/tune/select.cpp), for documents whose choices were made without it; --as
POLICY takes them again so as that energy policy would have from the same measured contenders
(both policies measure the same ones), with the rule. --join takes the files as parts of one
tune (the same model, batch, dtype, layout, backend and policies, e.g. a tune that stopped and
one of the layers it did not reach, `dnnx tune --layers`), each layer-direction in one part only,
and prints one table for them. Exit status 1 when a file has no measured step (no energy counter
where it was tuned: its steps' energy_meter says why), 2 when a file cannot be read or --join's
parts do not fit together."""

import argparse
import gzip
import json
import sys


# cuDNN's candidates that dnnx notes host_heavy (a legacy call, alone or inside a wrapper such
# as cudnn:padc:, and the tap-region and frame kinds built on legacy calls): documents without
# energy_fastest do not say, so it is read from the id.
HOST_HEAVY_MARKS = ("cudnn:legacy:", "cudnn:taps:", "cudnn:frames:")


def exhaustive_pick(measured, host_tie):
    """What exhaustive keeps among `measured` rows, for documents older than energy_fastest: the
    least time, unless it is host_heavy and the fastest row that is not is within host_tie of it
    (Note [host cost ties] in src/tune/select.cpp; host_heavy read from the ids)."""
    ranked = sorted(measured, key=lambda r: r["time_ms"])
    heavy = lambda r: any(mark in r["id"] for mark in HOST_HEAVY_MARKS)
    if not host_tie > 0 or not heavy(ranked[0]):
        return ranked[0]
    light = next((r for r in ranked if not heavy(r)), None)
    if light is not None and light["time_ms"] <= ranked[0]["time_ms"] * (1 + host_tie):
        return light
    return ranked[0]


def pick_beyond_spread(measured, fastest, delay):
    """The contender the energy policy keeps among `measured` rows: the least energy (energy x
    time with `delay`), unless it saves no more than the larger spread of it and the fastest."""
    def score(row):
        return row["energy_j"] * (row["time_ms"] if delay else 1.0)

    def noise(row):
        return (row.get("energy_spread_j") or 0.0) * (row["time_ms"] if delay else 1.0)

    best = min(measured, key=score)
    if best is not fastest and score(fastest) - score(best) <= max(noise(best), noise(fastest)):
        return fastest
    return best


def compare(document, beyond_spread=False, as_policy=None):
    """The per-step rows and the totals of one tune document; with `beyond_spread` the pick is
    taken again from the measured rows (pick_beyond_spread), as the document's policy would, or
    as `as_policy` (min_energy or energy_delay) would."""
    rows = []
    unmeasured = []
    options = document.get("options", {})
    for step in document.get("results", []):
        if step.get("error"):
            continue
        measured = [r for r in step.get("energy_rows", [])
                    if r.get("energy_j") is not None and r.get("time_ms") is not None]
        chosen = step.get("chosen") or {}
        if not measured or chosen.get("energy_j") is None:
            unmeasured.append(f"{step['layer']} {step['direction']}: "
                              f"{step.get('energy_meter', 'no energy measured')}")
            continue
        # What exhaustive keeps: the document names it (host_tie applied); in older documents
        # the rule is applied here (exhaustive_pick).
        named = [r for r in measured if r["id"] == step.get("energy_fastest")]
        fastest = named[0] if named else exhaustive_pick(measured, options.get("host_tie") or 0)
        pick = next((r for r in measured if r["id"] == chosen["id"]), None)
        if (beyond_spread or as_policy) and pick is not None:
            policy = as_policy or str(options.get(step["direction"], ""))
            pick = pick_beyond_spread(measured, fastest, policy.startswith("energy_delay"))
        if pick is None:
            unmeasured.append(f"{step['layer']} {step['direction']}: the chosen "
                              f"{chosen['id']} has no measured row")
            continue
        count = step.get("count", 1)
        rows.append({
            "layer": step["layer"], "direction": step["direction"], "count": count,
            "fastest": fastest["id"], "fastest_ms": fastest["time_ms"],
            "fastest_j": fastest["energy_j"],
            "chosen": pick["id"], "chosen_ms": pick["time_ms"], "chosen_j": pick["energy_j"],
            "differ": pick["id"] != fastest["id"],
            "saved": 1 - pick["energy_j"] / fastest["energy_j"] if fastest["energy_j"] > 0 else None,
            "time_cost": pick["time_ms"] / fastest["time_ms"] - 1,
        })
    total = {
        "steps": len(rows),
        "differ": sum(r["differ"] for r in rows),
        "fastest_j": sum(r["fastest_j"] * r["count"] for r in rows),
        "chosen_j": sum(r["chosen_j"] * r["count"] for r in rows),
        "fastest_ms": sum(r["fastest_ms"] * r["count"] for r in rows),
        "chosen_ms": sum(r["chosen_ms"] * r["count"] for r in rows),
        "unmeasured": unmeasured,
    }
    total["saved"] = 1 - total["chosen_j"] / total["fastest_j"] if total["fastest_j"] > 0 else None
    total["time_cost"] = (total["chosen_ms"] / total["fastest_ms"] - 1
                          if total["fastest_ms"] > 0 else None)
    return rows, total


# What the parts of one tune share (--join).
JOIN_KEYS = ("model", "batch", "dtype", "layout", "backend")
JOIN_POLICY_KEYS = ("fwd", "bwd_data", "bwd_weights", "host_tie")


def join(paths, documents):
    """One document from the parts of a tune: their steps in the order given. Raises ValueError
    when the parts differ in what JOIN_KEYS / JOIN_POLICY_KEYS name or repeat a layer-direction."""
    first = documents[0]
    steps = []
    seen = {}
    for path, document in zip(paths, documents):
        for key in JOIN_KEYS:
            if document.get(key) != first.get(key):
                raise ValueError(f"{path}: {key} {document.get(key)!r}, {paths[0]} has "
                                 f"{first.get(key)!r}: not parts of one tune")
        for key in JOIN_POLICY_KEYS:
            mine = document.get("options", {}).get(key)
            theirs = first.get("options", {}).get(key)
            if mine != theirs:
                raise ValueError(f"{path}: option {key} {mine!r}, {paths[0]} has {theirs!r}: "
                                 "not parts of one tune")
        for step in document.get("results", []):
            key = (step.get("layer"), step.get("direction"))
            if key in seen:
                raise ValueError(f"{path}: {key[0]} {key[1]} is in {seen[key]} too")
            seen[key] = path
            steps.append(step)
    joined = dict(first)
    joined["results"] = steps
    joined["complete"] = None  # whether the parts cover the model is not known here
    return joined


def percent(value):
    return "-" if value is None else f"{100 * value:+.1f}%"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="TUNE.json")
    parser.add_argument("--json", metavar="OUT.json")
    parser.add_argument("--rows", action="store_true", help="a row per layer-direction too")
    parser.add_argument("--beyond-spread", action="store_true",
                        help="take the pick again, keeping the fastest where the saving is within "
                             "the larger spread of the two")
    parser.add_argument("--as", dest="as_policy", choices=["min_energy", "energy_delay"],
                        help="take the picks again as this energy policy would (with the rule of "
                             "--beyond-spread)")
    parser.add_argument("--join", action="store_true",
                        help="the files are parts of one tune: one table for them")
    args = parser.parse_args(argv)
    out = {}
    failed = False
    documents = []
    for path in args.files:
        try:
            with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
                documents.append(json.load(f))
        except (OSError, ValueError) as error:
            print(f"energy_compare.py: {path}: {error}", file=sys.stderr)
            return 2
    named = list(zip(args.files, documents))
    if args.join:
        try:
            named = [(" + ".join(args.files), join(args.files, documents))]
        except ValueError as error:
            print(f"energy_compare.py: --join: {error}", file=sys.stderr)
            return 2
    for path, document in named:
        rows, total = compare(document, args.beyond_spread, args.as_policy)
        options = document.get("options", {})
        policies = {options.get(d) for d in ("fwd", "bwd_data", "bwd_weights")}
        print(f"\n### {path}: {document.get('model')} batch {document.get('batch')} "
              f"{document.get('dtype')} {document.get('layout')} [{document.get('backend')}], "
              f"policy {', '.join(sorted(p for p in policies if p))}"
              + (f", picks taken again as {args.as_policy}" if args.as_policy else
                 ", picks taken again beyond the spread" if args.beyond_spread else "")
              + (f" (incomplete: the tune stopped after {len(document.get('results', []))} "
                 "layer-directions)" if document.get("complete") is False else "")
              + (f" (joined from {len(args.files)} tunes)" if args.join else "") + "\n")
        if args.rows and rows:
            print("| layer | direction | count | fastest | ms | mJ | chosen | ms | mJ | energy | time |")
            print("|---|---|--:|---|--:|--:|---|--:|--:|--:|--:|")
            for r in rows:
                print(f"| {r['layer']} | {r['direction']} | {r['count']} | {r['fastest']} | "
                      f"{r['fastest_ms']:.4f} | {1e3 * r['fastest_j']:.4f} | "
                      f"{r['chosen'] if r['differ'] else '(same)'} | {r['chosen_ms']:.4f} | "
                      f"{1e3 * r['chosen_j']:.4f} | {percent(-r['saved'] if r['saved'] is not None else None)} | "
                      f"{percent(r['time_cost'])} |")
            print()
        print("| layer-directions measured | chosen differs | fastest mJ (x count) | chosen mJ | "
              "energy | fastest ms (x count) | chosen ms | time |")
        print("|--:|--:|--:|--:|--:|--:|--:|--:|")
        print(f"| {total['steps']} | {total['differ']} | {1e3 * total['fastest_j']:.3f} | "
              f"{1e3 * total['chosen_j']:.3f} | "
              f"{percent(-total['saved'] if total['saved'] is not None else None)} | "
              f"{total['fastest_ms']:.3f} | {total['chosen_ms']:.3f} | {percent(total['time_cost'])} |")
        for line in total["unmeasured"]:
            print(f"- not measured: {line}")
        if total["steps"] == 0:
            failed = True
        out[path] = {"rows": rows, "total": total}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
