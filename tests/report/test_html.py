"""The HTML page without a browser: what it holds for a long synthetic run, for reports with
missing sections (schema 1, no scaler, no memory), and that it fetches nothing."""
from __future__ import annotations

import re
from html.parser import HTMLParser

from loopcheck.report import downsample, html
from loopcheck.report.data import series

from .synthetic import SPIKE_STEP, report


class _Page(HTMLParser):
    """Elements by id and every path/g with data-x/data-y, with their attributes."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.by_id: dict[str, dict[str, str]] = {}
        self.data: list[tuple[str, dict[str, str]]] = []
        self.urls: list[str] = []
        self.tags: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if "id" in a:
            self.by_id[a["id"]] = a
        if "data-x" in a:
            self.data.append((tag, a))
        for key in ("src", "href", "action", "poster", "data"):
            if key in a and key != "data":
                self.urls.append(a[key])


def _numbers(text: str) -> list[float | None]:
    return [float(v) if v else None for v in text.split(",")]


def _series_in(page: str, chart_id: str) -> list[tuple[list[float | None], list[float | None]]]:
    body = page.split(f'id="{chart_id}"', 1)[1].split("</figure>", 1)[0]
    return [(_numbers(x), _numbers(y)) for x, y in re.findall(r'<path class="series[^"]*"[^>]*data-x="([^"]*)" '
                                                                r'data-y="([^"]*)"', body)]


def test_a_100k_step_run_stays_small_and_keeps_its_spikes() -> None:
    data = report(100_000)
    page = html.render(data)
    assert len(page.encode()) < 1_000_000
    (xs, ys), = _series_in(page, "chart-backward-steps")
    assert len(xs) < 2_000
    assert ys[xs.index(SPIKE_STEP)] == 64  # the one 64-pass window survives downsampling
    assert xs[0] == 0 and xs[-1] == 99_999
    (mx, my), = _series_in(page, "chart-memory")
    assert my[mx.index(SPIKE_STEP)] == max(my)  # and so does the memory spike
    lr = _series_in(page, "chart-lr")
    assert len(lr) == 2  # one line per param group
    assert max(v for v in lr[0][1] if v) == max(group[0] for group in data["series"]["lr"])


def test_histogram_bars_hold_exact_counts() -> None:
    page = _Page(html.render(report(10_000)))
    bars = {a["data-x"]: float(a["data-y"]) for tag, a in page.data if "bar" in a.get("class", "")}
    assert bars == {"3": 11, "4": 9_989}


def test_scheduler_horizon_skipped_steps_peak_and_capacity_are_drawn() -> None:
    data = report(5_000)
    text = html.render(data)
    page = _Page(text)
    groups = {a["class"]: a for tag, a in page.data if tag == "g"}
    assert _numbers(groups["horizon"]["data-x"]) == [5_000]
    assert _numbers(groups["skip"]["data-x"]) == data["series"]["skipped"]
    assert 'class="peak"' in text and "capacity" in text
    assert page.by_id["verdict"]["class"] == "verdict warning"


def test_nothing_is_fetched() -> None:
    text = html.render(report(1_000))
    page = _Page(text)
    assert "default-src 'none'" in text
    assert not {"script", "img", "link", "iframe", "object", "embed"} & set(page.tags)
    assert all(u.startswith(("#", "https://github.com/loopcheck/loopcheck/blob/main/rules/")) for u in page.urls)


def test_a_schema_1_report_and_missing_sections_still_render() -> None:
    v1 = {"schema": "loopcheck-runtime-report/1", "exit": {"how": "finished", "code": 0},
          "findings": [{"code": "LC101", "name": "zero-grad-in-accumulation", "severity": "error", "message": "m",
                        "file": None, "line": None, "count": 4, "first_step": 0}],
          "counters": {"optimizer_steps": 4, "backward_passes": 16, "backward_per_step": {"4": 4}},
          "memory": {"source": "cpu-rss", "per_step": [{"step": 0, "bytes": 1 << 20}, {"step": 8, "bytes": 2 << 20}]}}
    text = html.render(v1)
    assert "Not shown:" in text and "schema 1" in text
    page = _Page(text)
    assert {"chart-backward-histogram", "chart-memory", "finding-0"} <= set(page.by_id)
    assert "chart-lr" not in page.by_id
    assert "rules/LC101-zero-grad-in-accumulation.md" in text
    bare = html.render({"schema": "loopcheck-runtime-report/2"})
    assert "No runtime finding" in bare


def test_series_reader_accepts_nulls_and_short_columns() -> None:
    s = series({"series": {"step": [0, 1, 2], "backward_passes": [4, 4], "scale": [None, 1024.0, None],
                           "lr": [[0.1], [0.1, 0.01], None], "ticks": {"ema": [0, 0, 0]}}})
    assert s.backward_passes == [4, 4, None]
    assert s.lr == [[0.1, 0.1, None], [None, 0.01, None]]
    assert s.ticks == {}  # an EMA that never ticked has no line
    assert s.memory_bytes == []


def test_memory_sampled_every_few_steps_is_one_line_through_the_samples() -> None:
    # the runtime samples memory at every step for a while, then at every k-th step only
    steps = list(range(100))
    memory = [(64 + i) << 20 if i < 64 or i % 4 == 3 else None for i in steps]
    data = {"schema": "loopcheck-runtime-report/2", "findings": [],
            "series": {"step": steps, "backward_passes": [4] * 100, "memory_bytes": memory},
            "memory": {"source": "cuda-allocated", "device": "cuda:0"}}
    (xs, ys), = _series_in(html.render(data), "chart-memory")
    assert xs[-1] == 99 and ys[-1] == (64 + 99) << 20  # the samples after the dense phase are drawn
    assert None not in ys and xs == [i for i in steps if memory[i] is not None]


def test_downsampling_keeps_first_last_min_and_max_of_every_bucket() -> None:
    ys = [1.0] * 10_000
    ys[1234], ys[8765] = 50.0, -3.0
    kept = downsample.keep([ys], 100)
    assert {0, 1234, 8765, 9_999} <= set(kept)
    assert len(kept) <= 3 * 100 + 1
    assert downsample.keep([[1, 2, 3]], 100) == [0, 1, 2]


def test_labels_of_markers_a_few_steps_apart_do_not_overlap() -> None:
    from loopcheck.report import svg

    frame = svg._Frame(0, 200, 0, 4, False)
    near = [svg.Marker(0, "LC101 from step 0", "finding"), svg.Marker(5, "LC601 from step 5", "finding"),
            svg.Marker(150, "LC602 from step 150", "finding")]
    ys = [float(y) for y in re.findall(r'<text [^>]*y="([\d.]+)"', "".join(svg._markers(frame, near)))]
    assert len(ys) == 3
    assert ys[0] != ys[1]  # 5 steps apart: the second label goes one row down
    assert ys[2] == ys[0]  # far from both: the first row
