"""Writing a small project for the tests that check across its files."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_project(root: Path, files: dict[str, str]) -> None:
    """``files`` (relative path: source, dedented) under ``root``, with a ``pyproject.toml`` that
    marks ``root`` as the project's root."""
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


# A training loop on the deprecated `torch.cuda.amp` names: what LC206 reports unless the project pins
# an older torch (the pin-reading tests write it under the pins they test).
OLD_AMP_TRAINER = """
    import torch


    def train(model, loader, optimizer):
        scaler = torch.cuda.amp.GradScaler()
        for x, y in loader:
            optimizer.zero_grad()
            with torch.cuda.amp.autocast():
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()


    if __name__ == "__main__":  # a script (a module nothing runs or imports is dead code)
        net = torch.nn.Linear(4, 2)
        train(net, torch.load("batches.pt"), torch.optim.SGD(net.parameters(), lr=0.1))
"""
