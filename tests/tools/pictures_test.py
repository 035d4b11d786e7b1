#!/usr/bin/env python3
"""The pictures of the `dnnx` tool: `dnnx profile ... --plot FILE.svg` and `dnnx tune ...
--report FILE.html`, each checked against the JSON the same command prints.

    pictures_test.py DNNX WORKDIR structure   the SVG parses as XML and draws every timed row of
                                              the profile, the Pareto front, the chosen and the
                                              heuristic candidate, and lists every row that did
                                              not run with its reason; the HTML parses, holds one
                                              row per layer-direction with the JSON's values, and
                                              loads nothing from elsewhere
    pictures_test.py DNNX WORKDIR browser     the report opened in headless Chromium: its script
                                              runs without an error, sorts the layer table as the
                                              address asks, and the SVG renders as an image

Exit status 0: passed; 1: failed (the reason on stderr); 77: skipped (no Chromium for `browser`;
`scripts/setup.sh` installs Debian's).
"""

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(dnnx, *args):
    done = subprocess.run([dnnx, *args], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise Failure(f"dnnx {' '.join(args)} exited {done.returncode}\n--- stdout:\n"
                      f"{done.stdout}\n--- stderr:\n{done.stderr}")
    return done.stdout


def backend(dnnx):
    """cpu where this build has it (many candidates, several statuses), else reference."""
    versions = run(dnnx, "version")
    return "reference" if re.search(r"^\s*cpu: unavailable", versions, re.M) else "cpu"


# ---- the profile plot -------------------------------------------------------------------------

def check_plot(dnnx, work):
    svg_path = os.path.join(work, "profile.svg")
    # A 3x3 convolution with a workspace limit low enough to leave some candidates out: the plot
    # must list them with their reason.
    args = ["profile", "conv", "--input", "2x8x12x12", "--weights", "16x8x3x3", "--pad", "1",
            "--runs", "2", "--warmup", "1", "--backend", backend(dnnx), "--json",
            "--plot", svg_path]
    profiles = json.loads(run(dnnx, *args))
    check(len(profiles) == 3, f"expected 3 profiles, got {len(profiles)}")
    root = ET.parse(svg_path).getroot()
    check(root.tag == SVG + "svg", f"root element {root.tag}")
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    check(len(panels) == len(profiles), f"{len(panels)} panels for {len(profiles)} profiles")
    for profile, panel in zip(profiles, panels):
        where = f"{profile['op']} {profile['direction']}"
        check(panel.get("data-direction") == profile["direction"], f"{where}: panel order")
        drawn = {}
        for circle in panel.iter(SVG + "circle"):
            classes = (circle.get("class") or "").split()
            if "candidate" in classes and circle.get("data-id") is not None:
                drawn[circle.get("data-id")] = (classes, circle)
        timed = [r for r in profile["rows"]
                 if r["runs"] > 0 and r["median_ms"] is not None and r["status"] in ("ok", "abandoned")]
        check(len(drawn) == len(timed),
              f"{where}: {len(drawn)} points drawn for {len(timed)} rows that ran")
        for row in timed:
            rid = row["algo"]["id"]
            check(rid in drawn, f"{where}: {rid} ran but is not drawn")
            classes, circle = drawn[rid]
            check(("abandoned" in classes) == (row["status"] == "abandoned"),
                  f"{where}: {rid} drawn as {classes}, status {row['status']}")
            check(abs(float(circle.get("data-ms")) - row["median_ms"]) <= 1e-6 * row["median_ms"],
                  f"{where}: {rid} drawn at {circle.get('data-ms')} ms, JSON {row['median_ms']}")
            check(int(circle.get("data-workspace")) == row["algo"]["workspace_bytes"],
                  f"{where}: {rid} workspace")
            title = circle.find(SVG + "title")
            check(title is not None and rid in title.text, f"{where}: {rid} has no tooltip")
        # The front: exactly the timed rows no other timed row beats on both time and workspace.
        ok = [r for r in timed if r["status"] == "ok"]
        expected_front = set()
        best_ws = None
        for r in sorted(ok, key=lambda r: (r["median_ms"], r["algo"]["workspace_bytes"])):
            if best_ws is None or r["algo"]["workspace_bytes"] < best_ws:
                expected_front.add(r["algo"]["id"])
                best_ws = r["algo"]["workspace_bytes"]
        front = {i for i, (classes, _) in drawn.items() if "front" in classes}
        check(front == expected_front, f"{where}: front {sorted(front)}, expected {sorted(expected_front)}")
        if ok:
            paths = [p for p in panel.iter(SVG + "path") if p.get("class") == "pareto"]
            check(len(paths) == 1, f"{where}: {len(paths)} Pareto paths")
        # The chosen and the heuristic marks.
        chosen = [c.get("data-id") for c in panel.iter(SVG + "circle") if c.get("class") == "chosen-mark"
                  and c.get("data-id")]
        check(chosen == ([profile["chosen"]] if profile["chosen"] else []),
              f"{where}: chosen mark on {chosen}, JSON chosen {profile['chosen']!r}")
        heuristic = [p.get("data-id") for p in panel.iter(SVG + "path")
                     if p.get("class") == "heuristic-mark" and p.get("data-id")]
        check(len(heuristic) <= 1, f"{where}: {len(heuristic)} heuristic marks")
        if heuristic:
            check(heuristic[0] in drawn, f"{where}: heuristic mark on {heuristic[0]}, not drawn")
        # Every row that did not run is listed with its reason beside the plot.
        listed = " ".join((t.text or "") for g in panel.iter(SVG + "g") if g.get("class") == "not-run"
                          for t in g.iter(SVG + "text"))
        listed = re.sub(r"\s+", " ", listed)
        for row in profile["rows"]:
            if row in timed:
                continue
            rid = row["algo"]["id"]
            check(rid in listed, f"{where}: {rid} ({row['status']}) is not listed")
            check(row["status"] in listed, f"{where}: status {row['status']} is not listed")
            words = row["detail"].split()[:4]
            check(" ".join(words) in listed, f"{where}: the reason of {rid} is not listed: {row['detail']!r}")
        # No energy was measured: no energy plot.
        check(not [g for g in panel.iter(SVG + "g") if g.get("class") == "energy-plot"],
              f"{where}: an energy plot without energy")
    # `dnnx plot` draws the same picture from the printed JSON.
    saved = os.path.join(work, "profile.json")
    with open(saved, "w") as out:
        json.dump(profiles, out)
    replot = os.path.join(work, "replot.svg")
    run(dnnx, "plot", saved, "--out", replot)
    with open(svg_path) as a, open(replot) as b:
        check(a.read() == b.read(), "dnnx plot of the --json output differs from --plot's SVG")
    check_energy_plot(dnnx, work, profiles)
    return svg_path


def check_energy_plot(dnnx, work, profiles):
    """The time-energy plot, from a saved profile given energy as NVML's meter would: a point per
    row with energy where the JSON puts it, and the front of time and energy exactly."""
    for profile in profiles:
        profile["energy_meter"] = "nvml: a board of the test"
        for i, row in enumerate(profile["rows"]):
            if row["status"] == "ok":
                # Slower candidates mostly leaner, not in order: a front of several points.
                row["energy_j"] = row["median_ms"] * 1e-3 * (300 - 25 * (i % 5)) * (1 - 0.1 * (i % 3))
                row["energy_spread_j"] = 0.01 * row["energy_j"]
                row["power_w"], row["clock_mhz"] = 350.0, 1980.0
    saved = os.path.join(work, "energy.json")
    with open(saved, "w") as out:
        json.dump(profiles, out)
    svg_path = os.path.join(work, "energy.svg")
    run(dnnx, "plot", saved, "--out", svg_path)
    root = ET.parse(svg_path).getroot()
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    for profile, panel in zip(profiles, panels):
        where = f"energy {profile['direction']}"
        plots = [g for g in panel.iter(SVG + "g") if g.get("class") == "energy-plot"]
        check(len(plots) == 1, f"{where}: {len(plots)} energy plots")
        points = {c.get("data-id"): c for c in plots[0].iter(SVG + "circle")
                  if "energy-point" in (c.get("class") or "").split()}
        measured = [r for r in profile["rows"] if r.get("energy_j") is not None]
        check(len(points) == len(measured), f"{where}: {len(points)} points, {len(measured)} rows")
        for row in measured:
            point = points[row["algo"]["id"]]
            check(abs(float(point.get("data-energy-j")) - row["energy_j"]) <= 1e-9 * row["energy_j"],
                  f"{where}: {row['algo']['id']} energy")
        expected, least = set(), None
        for r in sorted(measured, key=lambda r: (r["median_ms"], r["algo"]["workspace_bytes"])):
            if least is None or r["energy_j"] < least:
                expected.add(r["algo"]["id"])
                least = r["energy_j"]
        front = {i for i, c in points.items() if "front" in c.get("class").split()}
        check(front == expected, f"{where}: energy front {sorted(front)}, expected {sorted(expected)}")
        # A long header wraps between words (where depends on the backends built): spaces
        # collapsed, the wrapped lines read as one.
        text = " ".join(" ".join(t.text or "" for t in panel.iter(SVG + "text")).split())
        check("energy: nvml: a board of the test" in text, f"{where}: the meter is not named")


# ---- the tune report --------------------------------------------------------------------------

class ReportParser(html.parser.HTMLParser):
    """The rows of the report's tables and every reference to another resource."""

    def __init__(self):
        super().__init__()
        self.tables = {}
        self.table = None
        self.row = None
        self.cell = None
        self.external = []
        self.scripts = 0
        self.head_keys = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in ("src", "href"):
            if name in attrs:
                self.external.append(f"<{tag} {name}={attrs[name]}>")
        if tag == "link":
            self.external.append("<link>")
        if tag == "script":
            self.scripts += 1
        if tag == "table":
            self.table = attrs.get("id")
            self.tables[self.table] = []
            self.head_keys[self.table] = []
        elif tag == "tr" and self.table is not None:
            self.row = {"attrs": attrs, "cells": []}
        elif tag in ("td", "th") and self.row is not None:
            self.cell = {"tag": tag, "attrs": attrs, "text": ""}
            if tag == "th" and "data-key" in attrs:
                self.head_keys[self.table].append(attrs["data-key"])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row["cells"].append(self.cell)
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if self.row["cells"] and self.row["cells"][0]["tag"] == "td" or \
                    self.row["attrs"].get("data-layer") is not None:
                self.tables[self.table].append(self.row)
            self.row = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell["text"] += data


def tiny_model(work):
    path = os.path.join(work, "model.txt")
    with open(path, "w") as out:
        out.write("# name  src  weights  stride  pad  count\n"
                  "m.conv  4x10x10  8x4x3x3  1  1  2\n"
                  "m.depthwise  8x8x8  8x1x3x3  2  1  1\n"
                  "m.pointwise  8x5x5  6x8x1x1  1  0  3\n")
    return path


def check_report(dnnx, work):
    html_path = os.path.join(work, "report.html")
    json_path = os.path.join(work, "report.json")
    run(dnnx, "tune", "--model", tiny_model(work), "--batch", "2", "--runs", "1", "--warmup", "0",
        "--backend", backend(dnnx), "--json", json_path, "--report", html_path)
    with open(json_path) as f:
        report = json.load(f)
    with open(html_path, encoding="utf-8") as f:
        page = f.read()
    check(page.startswith("<!DOCTYPE html>"), "no doctype")
    parser = ReportParser()
    parser.feed(page)
    parser.close()
    check(not parser.external, f"the report loads other resources: {parser.external}")
    check(parser.scripts == 2, f"{parser.scripts} scripts, expected 2 (inline)")
    steps = parser.tables.get("steps")
    check(steps is not None, "no layer table")
    results = report["results"]
    check(len(steps) == len(results), f"{len(steps)} rows for {len(results)} results")
    keys = parser.head_keys["steps"]
    for key in ("layer", "direction", "chosen", "chosen_ms", "heuristic", "heuristic_ms", "speedup",
                "workspace"):
        check(key in keys, f"no column {key}")
    for row, result in zip(steps, results):
        cells = dict(zip(keys, row["cells"]))
        where = f"{result['layer']} {result['direction']}"
        check(cells["layer"]["text"] == result["layer"], f"{where}: layer cell {cells['layer']['text']}")
        check(cells["direction"]["text"] == result["direction"], f"{where}: direction cell")
        check(result["error"] is None, f"{where}: failed: {result['error']}")
        check(cells["chosen"]["text"] == result["chosen"]["id"], f"{where}: chosen cell")
        check(cells["heuristic"]["text"] == result["heuristic"]["id"], f"{where}: heuristic cell")
        for key, value in (("chosen_ms", result["chosen"]["time_ms"]),
                           ("heuristic_ms", result["heuristic"]["time_ms"]),
                           ("speedup", result["speedup"]),
                           ("workspace", result["chosen"]["workspace_bytes"])):
            shown = float(cells[key]["attrs"]["data-sort"])
            check(abs(shown - value) <= 1e-6 * max(abs(value), 1e-12),
                  f"{where}: {key} {shown}, JSON {value}")
        bars = re.findall(r'class="bar (chosen|heuristic)" style="width:([0-9.]+)%"',
                          page.split(f'data-layer="{result["layer"]}" data-direction="{result["direction"]}"')[1]
                          .split("</tr>")[0])
        check(len(bars) == 2, f"{where}: {len(bars)} bars")
        widths = dict(bars)
        c, h = result["chosen"]["time_ms"], result["heuristic"]["time_ms"]
        check(abs(float(widths["chosen"]) - 100 * c / max(c, h)) < 0.1 and
              abs(float(widths["heuristic"]) - 100 * h / max(c, h)) < 0.1,
              f"{where}: bar widths {widths} for {c} and {h} ms")
    totals = parser.tables.get("totals-table")
    check(totals is not None and len(totals) == len(report["totals"]),
          f"totals rows {None if totals is None else len(totals)}, JSON {len(report['totals'])}")
    for fact in (report["dnnx_version"], report["context"], report["environment"]["fingerprint"]):
        check(html_escape(fact) in page, f"the report does not show {fact!r}")
    check("chosen mJ/call" not in page, "an energy column without energy")
    # `dnnx report` writes the same page from the JSON file.
    again = os.path.join(work, "again.html")
    run(dnnx, "report", json_path, "--out", again)
    with open(again, encoding="utf-8") as f:
        check(f.read() == page, "dnnx report of the --json file differs from --report's page")
    # With an energy policy's measurements, the chosen candidate's energy has its column.
    for result in report["results"]:
        result["chosen"]["energy_j"] = result["chosen"]["time_ms"] * 0.25
        result["energy_meter"] = "nvml: a board of the test"
    energy_page, parser = redrawn(dnnx, work, report, "energy-report")
    keys = parser.head_keys["steps"]
    check("energy" in keys, f"no energy column: {keys}")
    for row, result in zip(parser.tables["steps"], report["results"]):
        cell = dict(zip(keys, row["cells"]))["energy"]
        check(abs(float(cell["attrs"]["data-sort"]) - result["chosen"]["energy_j"]) <=
              1e-7 * result["chosen"]["energy_j"], f"{result['layer']}: energy cell")
    check("nvml: a board of the test" in energy_page, "the report does not name the meter")
    # The tune's next step: a late plan that replaced the search's pick is named in the cache
    # column, a next step that failed under Failures.
    first, second = report["results"][0], report["results"][1]
    first["next_step"] = {"ms": 12.5, "settled_from": "test:searched", "error": None}
    second["next_step"] = {"ms": 3.0, "settled_from": None, "error": "no plan at hand"}
    step_page, parser = redrawn(dnnx, work, report, "next-step-report")
    keys = parser.head_keys["steps"]
    cells = [dict(zip(keys, row["cells"]))["cache"]["text"] for row in parser.tables["steps"]]
    check(cells[0].endswith("; a late plan, after test:searched") and "late plan" not in cells[1],
          f"next step in the cache column: {cells[:2]}")
    failure = f"{second['layer']} {second['direction']} (next step)"
    check(html_escape(failure) in step_page and "no plan at hand" in step_page,
          "the report does not list the failed next step")
    return html_path, report


def redrawn(dnnx, work, report, name):
    """(page, parsed page) of `dnnx report` drawing `report` written to WORK/NAME.json."""
    json_path = os.path.join(work, name + ".json")
    with open(json_path, "w") as out:
        json.dump(report, out)
    html_path = os.path.join(work, name + ".html")
    run(dnnx, "report", json_path, "--out", html_path)
    parser = ReportParser()
    with open(html_path, encoding="utf-8") as f:
        page = f.read()
    parser.feed(page)
    return page, parser


def html_escape(text):
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


# ---- in a browser -----------------------------------------------------------------------------

def chromium():
    for name in (os.environ.get("DNNX_TEST_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def dump_dom(browser, url, profile_dir):
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", f"--user-data-dir={profile_dir}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--dump-dom", url],
        capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise Failure(f"{browser} exited {done.returncode}\n{done.stderr[-4000:]}")
    uncaught = [line for line in done.stderr.splitlines() if "Uncaught" in line]
    check(not uncaught, f"script errors in the browser: {uncaught}")
    return done.stdout


def check_browser(dnnx, work):
    browser = chromium()
    if browser is None:
        print("skipped: no Chromium (chromium, chromium-browser or $DNNX_TEST_CHROMIUM); "
              "scripts/setup.sh installs Debian's", file=sys.stderr)
        return 77
    html_path, report = check_report(dnnx, work)
    profile_dir = os.path.join(work, "chromium-profile")
    for sort, descending in (("chosen_ms", False), ("speedup", True), ("layer", True)):
        url = "file://" + html_path + f"#sort={sort}" + ("-desc" if descending else "")
        dom = dump_dom(browser, url, profile_dir)
        error = re.search(r'<html[^>]*data-dnnx-error="([^"]*)"', dom)
        check(error is None, f"{url}: a script error: {error.group(1) if error else ''}")
        ready = re.search(r'<body[^>]*data-dnnx-ready="(\d+)"', dom)
        check(ready is not None, f"{url}: the page's script did not run to its end")
        check(int(ready.group(1)) == len(report["results"]),
              f"{url}: {ready.group(1)} rows, {len(report['results'])} results")
        parser = ReportParser()
        parser.feed(dom)
        keys = parser.head_keys["steps"]
        column = keys.index(sort)
        rows = parser.tables["steps"]
        if sort == "layer":
            shown = [r["cells"][column]["text"].lower() for r in rows]
        else:
            shown = [float(r["cells"][column]["attrs"]["data-sort"]) for r in rows]
        check(shown == sorted(shown, reverse=descending),
              f"{url}: the layer table is not sorted by {sort}: {shown}")
        # The header cell says how the table is sorted.
        check(re.search(rf'data-key="{sort}"[^>]*aria-sort="{"descending" if descending else "ascending"}"', dom)
              or re.search(rf'aria-sort="{"descending" if descending else "ascending"}"[^>]*data-key="{sort}"', dom),
              f"{url}: the {sort} header does not say it sorts the table")
    svg_path = check_plot(dnnx, work)
    dom = dump_dom(browser, "file://" + svg_path, profile_dir)
    check("This page contains the following errors" not in dom and "parsererror" not in dom,
          f"the SVG does not render: {dom[:2000]}")
    check("<svg" in dom and 'class="panel"' in dom, "the SVG's panels are not in the rendered document")
    return 0


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in ("structure", "browser"):
        print(__doc__, file=sys.stderr)
        return 2
    dnnx, work, what = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    work = tempfile.mkdtemp(prefix=what + "-", dir=os.path.abspath(work))
    try:
        if what == "structure":
            check_plot(dnnx, work)
            check_report(dnnx, work)
            return 0
        return check_browser(dnnx, work)
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
