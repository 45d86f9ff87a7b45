"""The framework scenarios in ``runtime/frameworks/`` and what each must produce.

A scenario marks every line a finding must point at with ``# expect: LCxxx``; its docstring says
which counters the report must show (``framework-expect:``), what the merged report of a
2-process run must show (``distributed-expect:``, run under torchrun with gloo) and which of these
wait on work not done yet (``pending: ITEM, ... (why)``: a code or a counter item; such items are
checked by strict-xfail tests, which fail as soon as they pass, so the line gets removed).
Counter items: ``steps N``, ``per-step N``, ``scheduler TYPE N``, ``ema TYPE N``,
``scaler SCALE UNSCALE STEP UPDATE``, ``lr V1 V2 ...`` (the LR used at each step), ``replicas N``,
``synced N`` (micro-batches that all-reduced, on every rank). Scenarios named ``*_watch.py`` run
under plain python and use ``loopcheck.runtime.watch()``, with the report path as argument."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ROOT / "runtime" / "frameworks"
HELPERS = {"cpu_torchvision.py"}
# scenario file prefix -> the modules the scenario imports (a missing one skips it)
REQUIRES = {"hf": ("transformers",), "accelerate": ("accelerate",), "lightning": ("lightning",),
            "timm": ("timm", "torchvision")}
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")
_CODE = re.compile(r"LC\d{3}$")


@dataclass(frozen=True)
class Scenario:
    path: Path
    expected: frozenset[tuple[str, str, int]]  # (file name, code, line)
    counters: tuple[str, ...]
    distributed: tuple[str, ...]
    pending: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def framework(self) -> str:
        return self.name.split("_")[0]

    @property
    def watch(self) -> bool:
        return self.name.endswith("_watch")

    @property
    def pending_codes(self) -> set[str]:
        return {item for item in self.pending if _CODE.match(item)}

    @property
    def pending_counters(self) -> tuple[str, ...]:
        return tuple(item for item in self.pending if not _CODE.match(item))


def _items(text: str, key: str) -> tuple[str, ...]:
    items: list[str] = []
    for match in re.finditer(rf"^{key}:\s*([^(\n\"]*)", text, re.M):
        items += [item.strip() for item in match.group(1).split(",") if item.strip()]
    return tuple(items)


def load(path: Path) -> Scenario:
    text = path.read_text()
    expected = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match:
            expected |= {(path.name, code.strip(), number) for code in match.group(1).split(",") if code.strip()}
    return Scenario(path, frozenset(expected), _items(text, "framework-expect"),
                    _items(text, "distributed-expect"), _items(text, "pending"))


def all_scenarios() -> list[Scenario]:
    return [load(p) for p in sorted(FRAMEWORKS.glob("*.py"))
            if p.name not in HELPERS and not p.name.endswith("_common.py")]


def findings_of(report: dict) -> set[tuple[str, str, int]]:
    return {(Path(f["file"]).name if f["file"] else "", f["code"], f["line"]) for f in report["findings"]}


def counter_problems(report: dict, items: tuple[str, ...]) -> list[str]:
    """Each counter item the report does not satisfy, with what the report holds instead."""
    counters = report.get("counters", {})
    problems = []
    for item in items:
        name, *values = item.split()
        if name == "steps":
            got = counters.get("optimizer_steps")
            ok = got == int(values[0])
        elif name == "per-step":
            got = counters.get("backward_per_step")
            ok = got == {values[0]: counters.get("optimizer_steps")}
        elif name in ("scheduler", "ema"):
            key, count = ("steps", "schedulers") if name == "scheduler" else ("updates", "ema")
            got = counters.get(count)
            ok = {"type": values[0], key: int(values[1])} in [
                {"type": e.get("type"), key: e.get(key)} for e in got or []]
        elif name == "scaler":
            got = counters.get("grad_scaler") or {}
            calls = dict(zip(("scale", "unscale_", "step", "update"), map(int, values)))
            ok = {key: got.get(key) for key in calls} == calls and got.get("enabled", True) is True
        elif name == "lr":
            got = [lrs[0] for lrs in report.get("series", {}).get("lr", [])]
            ok = len(got) == len(values) and all(
                math.isclose(g, float(v), rel_tol=1e-4, abs_tol=1e-12) for g, v in zip(got, values))
        elif name == "replicas":
            got = report.get("distributed", {}).get("effective_batch", {}).get("replicas")
            ok = got == int(values[0])
        elif name == "synced":
            ranks = report.get("distributed", {}).get("ranks", [])
            got = [[d.get("synced_micro_batches") for d in r.get("ddp", [])] for r in ranks]
            ok = len(got) > 1 and all(g == [int(values[0])] for g in got)
        else:
            raise ValueError(f"unknown counter item {item!r}")
        if not ok:
            problems.append(f"{item}: report has {got!r}")
    return problems
