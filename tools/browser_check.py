"""`make browser-check`: load a `ctrgen report` page in a real headless browser (Debian's chromium, driven by
selenium through chromium-driver) and check that its curves are rendered: every series of each run's metrics.jsonl is
a drawn polyline with one vertex per point and a non-empty box on the page (or, held constant, a summary line that
counts its points), a page of several runs has a legend entry per run and curve, the model graph's boxes are laid
out, and the page loaded nothing besides itself (self-contained). Needs selenium only (requirements/browser.txt).

    python tools/browser_check.py RUN_DIR/report.html              # metrics.jsonl is read from the same folder
    python tools/browser_check.py compare.html RUN_A RUN_B         # the runs in the order ctrgen report was given
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

# The flags of a browser that touches nothing but the page: no GPU, no first-run, update, sync or background traffic.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1200,2000")

MEASURE = """
const curves = [...document.querySelectorAll('svg.chart polyline.curve')].map(p => {
  const box = p.getBBox();
  return {run: p.dataset.run, tag: p.dataset.tag, vertices: p.points.numberOfItems, length: p.getTotalLength(),
          width: box.width, height: box.height, shown: p.getBoundingClientRect().width > 0};
});
const constants = [...document.querySelectorAll('span.constant')].map(c => ({run: c.dataset.run, tag: c.dataset.tag,
  points: Number(c.dataset.points)}));
const legend = [...document.querySelectorAll('figcaption.legend span')].map(s => s.textContent);
const boxes = [...document.querySelectorAll('svg.graph rect')].map(r => r.getBBox().width);
return {curves: curves, constants: constants, legend: legend, boxes: boxes, resources: performance.getEntriesByType('resource').map(e => e.name),
        title: document.title};
"""


def check(page: Path, runs: list[Path]) -> list[str]:
    expected = Counter((str(i), json.loads(line)["tag"]) for i, run in enumerate(runs)
                       for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip())
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    profile = tempfile.mkdtemp(prefix="ctrgen-browser-check-")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "chromedriver"))
    try:
        driver.get(page.resolve().as_uri())
        seen = driver.execute_script(MEASURE)
        driver.save_screenshot(str(page.with_suffix(".png")))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    problems = []
    drawn = {(c["run"], c["tag"]): c for c in seen["curves"]}
    constant = {(c["run"], c["tag"]): c["points"] for c in seen["constants"]}
    for (run, tag), count in sorted(expected.items()):
        curve = drawn.get((run, tag))
        if curve is None:
            if constant.get((run, tag)) != count:
                problems.append(f"run {run} {tag}: neither a curve nor a constant of {count} points on the page")
        elif curve["vertices"] != count:
            problems.append(f"run {run} {tag}: {curve['vertices']} vertices drawn, metrics.jsonl has {count} points")
        elif count > 1 and not (curve["length"] > 0 and curve["shown"] and curve["width"] > 0):
            problems.append(f"run {run} {tag}: not rendered (length {curve['length']}, "
                            f"box {curve['width']}x{curve['height']})")
    if len(runs) > 1:
        for run in runs:
            if not any(entry.split(" ", 1)[-1].startswith(f"{run} ") for entry in seen["legend"]):
                problems.append(f"{run}: not named in any chart's legend")
    if not seen["boxes"] or min(seen["boxes"]) <= 0:
        problems.append("the model graph has no laid-out boxes")
    if seen["resources"]:
        problems.append(f"the page loaded other resources: {seen['resources']}")
    if not problems:
        print(f"ok: {page} in chromium: {len(runs)} run(s), {len(drawn)} curves and {len(constant)} constant "
              f"series ({sum(expected.values())} points), {len(seen['boxes'])} graph boxes, no other resource "
              f"loaded; screenshot {page.with_suffix('.png')}")
    return problems


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0]).is_file():
        print("usage: browser_check.py REPORT.html [RUN_DIR...]", file=sys.stderr)
        return 2
    problems = check(Path(argv[0]), [Path(a) for a in argv[1:]] or [Path(argv[0]).parent])
    for line in problems:
        print(f"{argv[0]}: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
