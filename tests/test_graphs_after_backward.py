"""LC601 on a back-propagated loss kept in a sum made anew every pass over the data: host memory for one
pass's autograd nodes and no device memory (benchmarks/results/graph-memory-s24), so reported only with
``[tool.loopcheck.loss-kept-with-graph] after-backward = true``. Kept for the whole run it is reported
by default."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.config import ConfigError, parse
from tests.projects import write_project

EPOCH_SUM = """
    import torch


    def train(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            running_loss = 0.0
            for x, y in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                running_loss += loss
            print(epoch, float(running_loss) / len(loader))


    if __name__ == "__main__":
        net = torch.nn.Linear(4, 2)
        train(net, torch.load("batches.pt"), torch.optim.SGD(net.parameters(), lr=0.1), 10)
"""
# the pass's sum kept after the pass by a history made once: every pass's graph stays to the end
HISTORY = EPOCH_SUM.replace("        for epoch in range(epochs):\n", "        history = []\n        for epoch in range(epochs):\n") \
    .replace("            print(epoch, float(running_loss) / len(loader))\n", "            history.append(running_loss / len(loader))\n        return history\n")
# a running mean of the back-propagated loss, made anew every epoch
RUNNING_MEAN = EPOCH_SUM.replace("            for x, y in loader:\n", "            for step, (x, y) in enumerate(loader, 1):\n") \
    .replace("running_loss += loss", "running_loss += (loss - running_loss) * (1 / step)")
# a sum of the loss scaled by a number: reported by default (the epoch sums behind a user's out-of-memory
# report were written this way)
SCALED = EPOCH_SUM.replace("running_loss += loss", "running_loss += loss / len(loader)")
# KGIN's epoch: the sum made anew with other names in one tuple assignment, over a `while` loop
UNPACKED = EPOCH_SUM.replace("            running_loss = 0.0\n            for x, y in loader:\n",
                             "            running_loss, s = 0, 0\n            while s < len(loader):\n"
                             "                x, y = loader[s]\n                s += 1\n")
RUN_SUM = EPOCH_SUM.replace("        for epoch in range(epochs):\n            running_loss = 0.0\n",
                            "        running_loss = 0.0\n        for epoch in range(epochs):\n")

# an energy model's epoch (GraphEBM): the mean of a term the back-propagated loss was built from, and
# the loss itself, kept in lists made anew every epoch
TERM = """
    import torch


    def train(model, loader, optimizer, max_epochs, alpha=1.0):
        parameters = model.parameters()
        for epoch in range(max_epochs):
            losses_reg = []
            losses = []
            for _, batch in enumerate(loader):
                pos_x = batch.x
                neg_x = torch.rand_like(pos_x)
                model.train()
                model.zero_grad()
                pos_out = model(pos_x)
                neg_out = model(neg_x)
                loss_reg = (pos_out ** 2 + neg_out ** 2)
                loss_en = pos_out - neg_out
                loss = loss_en + alpha * loss_reg
                loss = loss.mean()
                loss.backward()
                optimizer.step()
                losses_reg.append(loss_reg.mean())
                losses.append(loss)
            print(epoch, torch.stack(losses_reg).mean().item(), torch.stack(losses).mean().item())
"""


def _lines(run_cli) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC601", "train.py")
    return [line for line in out.splitlines() if ": LC601" in line]


@pytest.mark.parametrize(("source", "default"), [(EPOCH_SUM, 0), (RUN_SUM, 1), (TERM, 0), (HISTORY, 1),
                                                  (RUNNING_MEAN, 0), (SCALED, 1), (UNPACKED, 0)])
def test_a_sum_made_anew_every_epoch_is_reported_only_on_request(project: Path, run_cli, source: str,
                                                                 default: int) -> None:
    write_project(project, {"train.py": source})
    assert len(_lines(run_cli)) == default
    (project / "pyproject.toml").write_text("[tool.loopcheck.loss-kept-with-graph]\nafter-backward = true\n")
    found = _lines(run_cli)
    assert len(found) == (2 if source is TERM else 1)  # the cached result is not reused: the setting is in its key
    if source is EPOCH_SUM:
        assert "by the graph's nodes only" in found[0]


@pytest.mark.parametrize(("table", "message"), [
    ({"after_backward": True}, "unknown key 'after_backward' (did you mean 'after-backward'?)"),
    ({"after-backward": "yes"}, "after-backward must be true or false, not 'yes'"),
    (True, "loss-kept-with-graph must be a table"),
])
def test_bad_settings_are_named(table: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        parse({"loss-kept-with-graph": table}, Path("pyproject.toml"))


def test_the_setting_goes_with_lr_scaling() -> None:
    config = parse({"lr-scaling": {"reference-batch-size": 256, "reference-lr": 0.1},
                    "loss-kept-with-graph": {"after-backward": True}}, Path("pyproject.toml"))
    assert config.options.graphs_after_backward and config.options.lr_scaling is not None


def test_a_history_of_pass_sums_keeps_every_pass_graph(project: Path, run_cli) -> None:
    torch = pytest.importorskip("torch")
    write_project(project, {"train.py": HISTORY})
    assert "`history` keeps each pass's sum" in _lines(run_cli)[0]
    namespace: dict = {}
    exec(compile(textwrap.dedent(HISTORY).replace('if __name__ == "__main__":', "if False:"), "train.py", "exec"),
         namespace)
    net = torch.nn.Linear(4, 2)
    loader = [(torch.randn(3, 4), torch.tensor([0, 1, 0])) for _ in range(2)]
    history = namespace["train"](net, loader, torch.optim.SGD(net.parameters(), lr=0.1), 3)
    assert all(total.grad_fn is not None for total in history)  # the first pass's graph is still held at the end
