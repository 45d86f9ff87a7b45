"""Size and speed of the HTML run report for a long run:

    python benchmarks/report_html.py [--steps 100000] [--rounds 5] [--browser] [--json OUT.json]

Builds the synthetic schema-2 report of ``tests/report/synthetic.py`` (``--steps`` optimizer steps,
every series at full length), then measures, each over ``--rounds`` rounds (median, min, max):
the time to render and write the page (``loopcheck.report.html.write``, including downsampling),
its size in bytes, and with ``--browser`` the time Debian's Chromium takes to load and paint it
(headless, through Playwright: navigation start to the load event, and to two animation frames
after it, in a fresh page each round). ``loopcheck report show`` (text + terminal charts) is timed
too."""
from __future__ import annotations

import argparse
import io
import json
import platform
import statistics
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loopcheck.report import html  # noqa: E402
from tests.report.synthetic import report  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def _browser(page_path: Path, rounds: int, chromium: str) -> dict[str, object]:
    from playwright.sync_api import sync_playwright

    url = page_path.resolve().as_uri()
    load, painted, requests = [], [], []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=chromium, args=ARGS,
                                                       viewport={"width": 1100, "height": 900})
        for _ in range(rounds + 1):  # the first round warms the browser up and is not counted
            page = context.new_page()
            page.on("request", lambda r: requests.append(r.url) if r.url != url else None)
            start = time.perf_counter()
            page.goto(url, wait_until="load")
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            painted.append(time.perf_counter() - start)
            load.append(page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
            page.close()
        context.close()
    return {"load_event_s": _stats(load[1:]), "load_and_two_frames_s": _stats(painted[1:]),
            "other_requests": sorted(set(requests))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--browser", action="store_true")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    data = report(args.steps)
    json_bytes = len(json.dumps(data))
    out: dict[str, object] = {"steps": args.steps, "report_json_bytes": json_bytes, "python": platform.python_version(),
                              "machine": platform.machine()}
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "run.html"
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            html.write(data, page)
            times.append(time.perf_counter() - start)
        out["html_bytes"] = page.stat().st_size
        out["write_s"] = _stats(times)
        report_path = Path(folder) / "r.json"
        report_path.write_text(json.dumps(data))
        from loopcheck.cli import main as cli

        shown = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            with redirect_stdout(io.StringIO()):
                cli(["report", "show", str(report_path), "--color", "never"])
            shown.append(time.perf_counter() - start)
        out["report_show_s"] = _stats(shown)
        if args.browser:
            out["chromium"] = _browser(page, args.rounds, args.chromium)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
