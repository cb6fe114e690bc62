"""Interaction latency of the teaching page in Chromium: a control's input to the next painted frame.

For each of stage, head and query, 100 changes are made in the page; and each stage's first visit
is timed as a reader makes it, stepping on after a rest on the stage before, on fresh pages (the
100 changes of stage come back to stages already shown). A sample runs from the change
event to the first task after the next animation frame, when that frame has been painted. Headless
Chromium paces its frames at 60 Hz whatever its flags, so the raw time also holds the idle wait for
the next frame to begin (up to 16.7 ms, whatever we do). The busy time leaves that wait out: our
work after the event, plus the frame's own work (from the first animation frame callback, asked
for before the change, to the task after paint: the page's own callbacks, which it asks for during
the change, run after it and are counted, with the rendering). Our work ends with the page laid
out (LAID_OUT): Chromium's form autofill, told that a menu's selection changed (the page sets the
menus to the view it shows), lays the page out in a task of its own before the frame, which
neither our work nor the frame would otherwise count: the frame then finds the layout done (the
work column holds it too). Runs before HISTORY.md's entry of 2026-12-07, 08:20, left it out: 1 to
4 ms a change at p50 on the teaching page, 3 to 9 ms at 512 tokens. The target
is a busy p95 under 16 ms, so every change is painted in the very next frame; `next_frame` also
checks that the change was drawn before that frame's callbacks ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from playwright.sync_api import sync_playwright

from ._browser import ARGS, CHROMIUM, serve

RESULTS = Path(__file__).resolve().parent / "results"
CHANGES = 100
TARGET_MS = 16.0

# the page laid out, so that its layout is counted as our work (see above)
LAID_OUT = "document.documentElement.offsetHeight;"
MEASURE = """async ([label, count]) => {
  const select = [...document.querySelectorAll("select")].find((s) => s.labels[0].textContent === label);
  const frame = () => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));
  const work = [], busy = [], raw = [];
  let nextFrame = 0;
  for (let i = 0; i < count; i++) {
    await frame();
    const before = document.querySelector(".mha-explorer .stage h2").textContent;
    let tFrame = 0, changed = false;
    // asked for before the change: the first of the frame's callbacks, ahead of the page's own
    const painted = new Promise((done) => requestAnimationFrame(() => {
      tFrame = performance.now();
      changed = document.querySelector(".mha-explorer .stage h2").textContent !== before;
      setTimeout(done, 0);
    }));
    const t0 = performance.now();
    select.selectedIndex = (select.selectedIndex + 1) % select.options.length;
    select.dispatchEvent(new Event("change", { bubbles: true }));
    await null;  // the explorer draws in a microtask queued by the change
    LAID_OUT
    const t1 = performance.now();
    await painted;
    const t2 = performance.now();
    if (changed) nextFrame += 1;
    work.push(t1 - t0);
    busy.push(t1 - t0 + (t2 - tFrame));
    raw.push(t2 - t0);
  }
  return { work, busy, raw, nextFrame };
}""".replace("LAID_OUT", LAID_OUT)


# A reader stepping on through the stages: each stage's first visit, after a rest (READ_MS) on the
# one before, as bench_page times a change; `open_view` opens a fresh view first, VIEWS times.
READ_MS = 1000
VIEWS = 3


def first_visits(page, open_view) -> dict:
    """Busy p50 and p95 of every stage's first visit after the first, stepped through in order, over VIEWS fresh views."""
    busy, next_frame = [], 0
    for _ in range(VIEWS):
        open_view()
        stages = page.locator(".mha-explorer .steps li").count()
        for _ in range(stages - 1):
            page.wait_for_timeout(READ_MS)
            sample = page.evaluate(MEASURE, ["Calculation stage", 1])  # the next stage, timed as every change
            busy += sample["busy"]
            next_frame += sample["nextFrame"]
    row = {
        "busy_p50_ms": float(np.percentile(busy, 50)),
        "busy_p95_ms": float(np.percentile(busy, 95)),
        "drawn_in_next_frame": f"{next_frame}/{len(busy)}",
    }
    row["meets_target"] = row["busy_p95_ms"] < TARGET_MS and next_frame == len(busy)
    return row


def main() -> None:
    url, server = serve()
    report = {"changes_per_control": CHANGES, "target_p95_ms": TARGET_MS, "controls": {}}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url)
            page.wait_for_selector(".mha-explorer .stage h2")
            print(
                f"{'control':<20}{'work p95':>10}{'busy p50':>10}{'busy p95':>10}{'raw p95':>10}{'next frame':>12}"
                f"  target: busy p95 < {TARGET_MS:g} ms"
            )
            for label in ("Calculation stage", "Inspect head", "Query token"):
                samples = page.evaluate(MEASURE, [label, CHANGES])
                row = {
                    "work_p95_ms": float(np.percentile(samples["work"], 95)),
                    "busy_p50_ms": float(np.percentile(samples["busy"], 50)),
                    "busy_p95_ms": float(np.percentile(samples["busy"], 95)),
                    "raw_p95_ms": float(np.percentile(samples["raw"], 95)),
                    "drawn_in_next_frame": f"{samples['nextFrame']}/{CHANGES}",
                }
                row["meets_target"] = row["busy_p95_ms"] < TARGET_MS and samples["nextFrame"] == CHANGES
                report["controls"][label] = row
                print(
                    f"{label:<20}{row['work_p95_ms']:>10.2f}{row['busy_p50_ms']:>10.2f}{row['busy_p95_ms']:>10.2f}"
                    f"{row['raw_p95_ms']:>10.2f}{row['drawn_in_next_frame']:>12}  {'PASS' if row['meets_target'] else 'MISS'}"
                )
            def open_view():
                page.goto("about:blank")
                page.goto(url)
                page.wait_for_selector(".mha-explorer .stage h2")

            row = report["controls"]["Stage, first visits"] = first_visits(page, open_view)
            print(
                f"{'Stage, first visits':<20}{'':>10}{row['busy_p50_ms']:>10.2f}{row['busy_p95_ms']:>10.2f}{'':>10}{row['drawn_in_next_frame']:>12}"
                f"  {'PASS' if row['meets_target'] else 'MISS'}  (each after a {READ_MS} ms rest on the stage before)"
            )
            browser.close()
    finally:
        server.should_exit = True
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "page.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
