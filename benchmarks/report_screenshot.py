"""Screenshot an HTML run report in Debian's Chromium (headless, through Playwright for Python):

    python benchmarks/report_screenshot.py out/run.html benchmarks/results/report-gpu.png [--width 1100]

Also prints how long the page took to load and render (navigation start to load, and to the
first paint after it), the number of requests other than the page itself (must be 0) and any
console error. Needs `pip install playwright` and /usr/bin/chromium (`apt-get install chromium`);
never `playwright install`."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--width", type=int, default=1100)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    url = args.html.resolve().as_uri()
    requests, errors = [], []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=args.chromium, args=ARGS,
                                                       viewport={"width": args.width, "height": 900})
        page = context.new_page()
        page.on("request", lambda r: requests.append(r.url) if r.url != url else None)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        start = time.perf_counter()
        page.goto(url, wait_until="load")
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        wall = time.perf_counter() - start
        timing = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                               " const p = performance.getEntriesByName('first-contentful-paint')[0];"
                               " return {load_ms: n.loadEventEnd, dom_ms: n.domContentLoadedEventEnd,"
                               " first_paint_ms: p ? p.startTime : null}; }")
        args.png.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(args.png), full_page=True)
        context.close()
    print(json.dumps({"html": str(args.html), "bytes": args.html.stat().st_size, "png": str(args.png),
                      "load_and_two_frames_s": round(wall, 3), **timing, "other_requests": requests,
                      "console_errors": errors}, indent=2))
    return 1 if requests or errors else 0


if __name__ == "__main__":
    sys.exit(main())
