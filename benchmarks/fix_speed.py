"""Time ``loopcheck check --fix`` on generated training files of 2,000 and 20,000 lines.

Reproduce (the commands behind benchmarks/results/fix-speed.md):

    python benchmarks/fix_speed.py --runs 3
    python benchmarks/fix_speed.py --runs 1 --loopcheck-cmd "/tmp/old/venv/bin/python -m loopcheck"

Each file is a module of model code and helper functions with one training loop per 100 lines;
every loop has one pitfall with a safe fix, of a rotating kind (LC101, LC102, LC107, LC201, LC204,
LC301, LC302, LC401): 20 fixes in 2,000 lines, 200 in 20,000. The file is written to a fresh
temporary directory outside any git repository before every run (so nothing is cached and
nothing is skipped), then ``loopcheck check --fix --no-cache`` runs on it as a subprocess. The
report gives the file's lines, the findings with a safe fix before, the fixes applied (from the
"Fixed N" line), the findings left, the median and min wall time, and the median CPU time of the
``--fix`` process (user + sys: steadier than wall time on a shared machine).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PITFALLS = {
    "LC101": """\
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
""",
    "LC102": """\
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y)
        loss.backward()
        total += loss.item()
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
""",
    "LC107": """\
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
""",
    "LC201": """\
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
""",
    "LC204": """\
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y) / accum
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
""",
    "LC301": """\
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()
""",
    "LC302": """\
    for x, y in loader:
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        scheduler.step()
        optimizer.step()
""",
    "LC401": """\
    for i, (x, y) in enumerate(loader):
        loss = criterion(model(x), y) / accum
        loss.backward()
        ema.update(model)
        if (i + 1) % accum == 0 or (i + 1) == len(loader):
            optimizer.step()
            optimizer.zero_grad()
""",
}

FILLER = '''\
class Block{n}(nn.Module):
    """A residual block: norm, two projections, dropout."""

    def __init__(self, dim, hidden, dropout=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = torch.nn.functional.gelu(h)
        return x + self.drop(self.down(h))


def describe{n}(config, width=80):
    lines = []
    for key, value in sorted(config.items()):
        if isinstance(value, float):
            lines.append(f"{{key:<20}} {{value:.4g}}")
        elif isinstance(value, (list, tuple)):
            lines.append(f"{{key:<20}} {{', '.join(map(str, value))}}")
        else:
            lines.append(f"{{key:<20}} {{value}}")
    return "\\n".join(line[:width] for line in lines)


def schedule{n}(step, warmup=100, total=1000, base=1e-3):
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def merge{n}(left, right):
    out = dict(left)
    for key, value in right.items():
        if key in out and isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = merge{n}(out[key], value)
        else:
            out[key] = value
    return out
'''

HEADER = '''\
"""Generated for benchmarks/fix_speed.py."""
import math

import torch
from torch import nn

scaler = torch.amp.GradScaler("cuda")
'''


def generate(lines: int) -> str:
    """A module of about ``lines`` lines with one pitfall loop per 100 lines."""
    parts = [HEADER]
    codes = list(PITFALLS)
    n = 0
    while sum(p.count("\n") for p in parts) < lines:
        code = codes[n % len(codes)]
        parts.append(FILLER.format(n=2 * n) + "\n\n" + FILLER.format(n=2 * n + 1))
        parts.append(f"\n\ndef train_{code.lower()}_{n}(model, loader, optimizer, scheduler, ema, criterion, accum):\n"
                     f"    total = 0.0\n{PITFALLS[code]}    return total\n\n\n")
        n += 1
    return "".join(parts)


def count_fixable(path: Path, cmd: list[str]) -> int:
    out = subprocess.run([*cmd, "check", "--no-cache", "--exit-zero", "--output-format", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    import json

    return sum(1 for f in json.loads(out) if f.get("fix") and f["fix"].get("applicability", "safe") == "safe")


def time_fix(text: str, cmd: list[str]) -> tuple[float, float, int, int, int]:
    """(wall s, CPU s of the process, safe fixes before, fixes applied, safe fixes left)."""
    import resource

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.py"
        path.write_text(text)
        before = count_fixable(path, cmd)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([*cmd, "check", "--fix", "--no-cache", "--exit-zero", str(path)], cwd=tmp,
                              capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime
        fixed = re.search(r"Fixed (\d+)", done.stdout + done.stderr)
        left = count_fixable(path, cmd)
        return elapsed, cpu, before, int(fixed.group(1)) if fixed else 0, left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--loopcheck-cmd", default=f"{sys.executable} -m loopcheck")
    args = parser.parse_args()
    cmd = shlex.split(args.loopcheck_cmd)
    print(f"command: `{shlex.join(cmd)} check --fix --no-cache FILE`; load average before: "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| lines | safe fixes before | fixed | left | median wall s | min wall s | median CPU s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        text = generate(size)
        times, cpus, results = [], [], []
        for _ in range(args.runs):
            elapsed, cpu, before, fixed, left = time_fix(text, cmd)
            times.append(elapsed)
            cpus.append(cpu)
            results.append((before, fixed, left))
        before, fixed, left = results[-1]
        print(f"| {text.count(chr(10))} | {before} | {fixed} | {left} | {statistics.median(times):.2f} | "
              f"{min(times):.2f} | {statistics.median(cpus):.2f} |", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
