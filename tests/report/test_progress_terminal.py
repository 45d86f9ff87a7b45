"""The status line end to end: ``loopcheck run`` on a pseudo-terminal, with a script that prints a
line every few steps. Every line the script prints starts at the beginning of a terminal line (the
status line was erased first), the status line shows up while it runs, and nothing of it is left
once the summary is printed."""
from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, _env

SCRIPT = """
import time
import torch

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(60):
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
    if step % 10 == 9:
        print(f"script line {step}", flush=True)
    time.sleep(0.1)
"""


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_status_line_on_a_terminal(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    leader, follower = os.openpty()
    env = _env()
    for name in ("LOOPCHECK_NO_PROGRESS", "CI", "RANK", "LOCAL_RANK", "NO_COLOR"):
        env.pop(name, None)
    process = subprocess.Popen([sys.executable, "-m", "loopcheck", "run", "--color", "never", str(script)],
                               cwd=ROOT, env=dict(env, COLUMNS="100"), stdin=subprocess.DEVNULL,
                               stdout=follower, stderr=follower)
    os.close(follower)
    out, deadline = b"", time.monotonic() + 300  # generous: a loaded machine runs it slowly
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif process.poll() is not None:
            break
    process.wait(timeout=30)
    os.close(leader)
    text = out.decode().replace("\r\n", "\n")
    assert process.returncode == 0, text
    # the elapsed time is whatever the machine took: only its form is checked
    assert re.search(r"\r\033\[Kloopcheck: step \d+ · 1 backward passes/step · 0 findings · \d+:\d\d:\d\d", text), text
    for step in (9, 19, 29, 39, 49, 59):  # the script's lines begin a line of their own
        assert re.search(rf"(^|\n|\r\033\[K)script line {step}\n", text), text
    # the status line never runs into the script's text, and is gone before the summary
    assert not re.search(r"\d:\d\d:\d\dscript line", text)
    tail = text[text.index("loopcheck: 60 optimizer steps"):]
    assert "\033[K" not in tail and "·" not in tail
