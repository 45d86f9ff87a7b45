"""The HTML reports of real runs in a real browser: Debian's Chromium, headless, driven by
Playwright for Python (the system browser; Playwright's own download is never used). Each page
must render its findings, rule links and plots with the run's numbers, log no console error and
make no request besides the file itself. Screenshots go to ``$LOOPCHECK_ARTIFACTS`` (else a pytest
temporary folder, printed).

Skipped where Chromium or Playwright is missing (a user's machine); in CI (``CI`` set) a missing
browser is a failure, since ``.ci/run`` installs both."""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopcheck.report import html

from .conftest import Run
from .synthetic import SPIKE_STEP, report

CHROMIUM = os.environ.get("LOOPCHECK_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install playwright)"
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=ARGS,
                                                       viewport={"width": 1100, "height": 900})
        yield context
        context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("LOOPCHECK_ARTIFACTS")
    path = Path(folder) / "report-screenshots" if folder else tmp_path_factory.mktemp("report-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    print(f"screenshots: {path}")
    return path


class Page:
    """A report opened in the browser, with every request but the file's own refused and kept."""

    def __init__(self, context: Any, path: Path, shots: Path) -> None:
        self.url = path.resolve().as_uri()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page = context.new_page()
        self.page.route("**/*", self._route)
        self.page.on("request", lambda r: None if r.url == self.url else self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(self.url, wait_until="load")
        self.page.screenshot(path=str(shots / f"{path.stem}.png"), full_page=True)

    def _route(self, route: Any) -> None:
        if route.request.url == self.url:
            route.continue_()
        else:
            self.requests.append(route.request.url)
            route.abort()

    def series(self, chart: str) -> list[tuple[list[float], list[float | None]]]:
        """The plotted values of each line of a chart, as the page holds them."""
        raw = self.page.eval_on_selector_all(f"#{chart} path.series",
                                             "els => els.map(e => [e.dataset.x, e.dataset.y])")
        return [([float(v) for v in x.split(",")], [float(v) if v else None for v in y.split(",")]) for x, y in raw]

    def bars(self, chart: str) -> dict[str, float]:
        """The bars of a chart, each only if the browser gave it a visible height."""
        raw = self.page.eval_on_selector_all(
            f"#{chart} g.bar", "els => els.map(e => [e.dataset.x, e.dataset.y, e.querySelector('rect')"
                               ".getBoundingClientRect().height])")
        return {x: float(y) for x, y, height in raw if height > 0}

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector)

    def close(self) -> None:
        assert self.requests == [], f"the page made requests: {self.requests}"
        assert self.errors == [], f"console errors: {self.errors}"
        self.page.close()


def _open(browser: Any, path: Path, shots: Path) -> Page:
    assert path.exists(), f"{path} was not written"
    return Page(browser, path, shots)


def test_lc101_page(browser: Any, shots: Path, runs: dict[str, Run]) -> None:
    page = _open(browser, runs["lc101"].html, shots)
    assert "1 finding: 1 error" in page.text("#verdict")
    finding = page.page.locator("article.finding[data-code=LC101]")
    assert finding.count() == 1
    assert finding.locator("a.rule").get_attribute("href").endswith("/rules/LC101-zero-grad-in-accumulation.md")
    assert "optimizer.zero_grad()" in finding.locator("pre.source .hit").inner_text()
    assert "4 times, first at optimizer step 0" in finding.locator(".when").inner_text()
    assert "runtime/lc101_zero_grad_in_window.py:13:5" in finding.locator(".where").inner_text()
    # every one of the 4 optimizer steps had 4 backward passes
    assert page.bars("chart-backward-histogram") == {"4": 4}
    (steps, passes), = page.series("chart-backward-steps")
    assert steps == [0, 1, 2, 3] and passes == [4, 4, 4, 4]
    marker = page.page.locator("#chart-backward-steps g.finding")
    assert marker.get_attribute("data-x") == "0" and "LC101 from step 0" in marker.text_content()
    assert "16 = micro-batch 4 × 4 backward passes per step × 1 rank" in page.text("header")
    page.close()


def test_clean_page(browser: Any, shots: Path, runs: dict[str, Run]) -> None:
    run = runs["clean"]
    page = _open(browser, run.html, shots)
    assert page.text("#verdict") == "No findings"
    assert page.page.locator("article.finding").count() == 0
    # 2 epochs of 10 batches, accumulation 4: windows of 4, 4, 2 per epoch
    assert page.bars("chart-backward-histogram") == {"2": 2, "4": 4}
    (steps, passes), = page.series("chart-backward-steps")
    assert passes == [4, 4, 2, 4, 4, 2]
    (steps, lr), = page.series("chart-lr")
    assert max(v for v in lr if v is not None) == pytest.approx(1e-3, rel=0.01)  # OneCycleLR's max_lr
    assert lr.index(max(v for v in lr if v is not None)) == 1  # warm-up, then annealing
    assert page.page.get_attribute("#chart-lr g.horizon", "data-x") == "6"  # total_steps=6
    ticks = {name: ys for (_, ys), name in zip(page.series("chart-ticks"), page.page.eval_on_selector_all(
        "#chart-ticks path.series", "els => els.map(e => e.dataset.name)"))}
    assert ticks["optimizer steps"] == [1, 2, 3, 4, 5, 6] and ticks["EMA updates"] == [0, 1, 2, 3, 4, 5]
    assert "scheduler steps 1.00 per optimizer step" in page.text("#chart-ticks figcaption")
    page.close()


def test_memory_growth_page(browser: Any, shots: Path, runs: dict[str, Run]) -> None:
    page = _open(browser, runs["leak"].html, shots)
    (steps, memory), = page.series("chart-memory")
    known = [m for m in memory if m is not None]
    assert len(known) >= 4
    assert known[-1] - known[0] >= 64 * 2**20  # 2 MiB kept per step
    rises = sum(b > a for a, b in zip(known, known[1:]))
    assert rises >= 0.75 * (len(known) - 1), known
    assert steps == sorted(steps)
    page.close()


def test_ddp_page(browser: Any, shots: Path, ddp_run: Run) -> None:
    page = _open(browser, ddp_run.html, shots)
    finding = page.page.locator("article.finding[data-code=LC502]")
    assert finding.count() == 1 and "on every rank" in finding.locator(".when").inner_text()
    assert page.bars("chart-ranks") == {"rank 0": 6, "rank 1": 6}
    assert "rank 1 differs from the first rank at step 0" in page.text("#divergence")
    rows = page.page.locator("table.ranks tbody tr")
    assert rows.count() == 2
    assert "× 2 ranks" in page.text("header")
    page.close()


def test_a_100k_step_page_renders_its_spike(browser: Any, shots: Path, tmp_path: Path) -> None:
    path = tmp_path / "synthetic-100k.html"
    html.write(report(100_000), path)
    page = _open(browser, path, shots)
    (steps, passes), = page.series("chart-backward-steps")
    assert passes[steps.index(SPIKE_STEP)] == 64
    box = page.page.locator("#chart-backward-steps path.series").bounding_box()
    assert box is not None and box["width"] > 500  # drawn across the plot
    page.close()


def test_gpu_memory_staircase_page(browser: Any, shots: Path, tmp_path: Path) -> None:
    """A real H200 run (tests/data/reports/README.md): a validation loss summed with its graph
    once per epoch, so CUDA memory climbs in six stairs and LC602 is reported."""
    saved = Path(__file__).parents[1] / "data" / "reports" / "gpu-lc602-staircase-h200.json"
    path = tmp_path / "gpu-lc602-staircase.html"
    html.write(json.loads(saved.read_text()), path)
    page = _open(browser, path, shots)
    finding = page.page.locator("article.finding[data-code=LC602]")
    assert finding.count() == 1
    assert finding.locator("a.rule").get_attribute("href").endswith("/rules/LC602-memory-growth.md")
    assert "optimizer.step()" in finding.locator("pre.source .hit").inner_text()
    assert "grew from 69 MiB to 189 MiB" in finding.inner_text()
    (steps, memory), = page.series("chart-memory")
    known = [m for m in memory if m is not None]
    assert known[-1] - known[0] >= 100 * 2**20
    rises = sum(b > a for a, b in zip(known, known[1:]))
    assert 5 <= rises <= len(known) // 4  # stairs, one per epoch: most steps stay level
    assert "NVIDIA H200" in page.text("header")
    page.close()
