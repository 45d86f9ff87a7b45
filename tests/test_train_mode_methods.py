"""LC605 reads a call of a method of the file's own class that puts its object (or part of it) in train
mode as that ``.train()``; a method that puts nothing in train mode, or may put something in eval mode,
undoes nothing."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.config import Options
from loopcheck.engine import check_text

CODE = """
class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.1))
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, 2))

    def prepare(self):
        for p in self.encoder.parameters():
            p.requires_grad = False
{body}

    def forward(self, x):
        return self.head(self.encoder(x))


def train_epoch(loader, discriminator, optimizer):
    discriminator.prepare()
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(discriminator(x), y).backward()
        optimizer.step()


def evaluate(loader, discriminator):
    discriminator.eval()
    with torch.no_grad():
        return sum(discriminator(x).argmax(1).eq(y).sum().item() for x, y in loader)


def main(loader):
    discriminator = Discriminator()
    optimizer = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    for epoch in range(3):
        train_epoch(loader, discriminator, optimizer)
        evaluate(loader, discriminator)
"""


def _lc605(body: str) -> list[int]:
    found = check_text(textwrap.dedent(CODE.format(body=body)), "train.py", frozenset({"LC605"}), Options())
    return [f.line for f in found]


@pytest.mark.parametrize("body", ["        self.head.train()", "        self.train()"])
def test_a_method_that_sets_train_mode_undoes_the_eval(body: str) -> None:
    assert _lc605(body) == []


@pytest.mark.parametrize("body", ["        pass", "        self.head.train(False)",
                                  "        self.head.train()\n        self.head.eval()"])
def test_a_method_that_sets_no_train_mode_undoes_nothing(body: str) -> None:
    text = textwrap.dedent(CODE.format(body=body))
    assert _lc605(body) == [text[:text.index("discriminator.eval()")].count("\n") + 1]
