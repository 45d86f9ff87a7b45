"""Which values of a training loop carry an autograd graph (loopcheck.model.memory)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from loopcheck.config import Options
from loopcheck.engine import check_source, check_text
from loopcheck.model import build
from loopcheck.model.memory import GraphReader

LOOP = '''
import torch
import torch.nn.functional as F


def terms(outputs, y):
    box = F.l1_loss(outputs[:, :4], y[:, :4])
    cls = F.cross_entropy(outputs[:, 4:], y[:, 4])
    return box + cls, {"box": box, "cls": cls}, {"box": box.item()}


model.train()
for x, y in loader:
    optimizer.zero_grad()
    outputs = model(x)
    loss, parts, numbers = terms(outputs, y)
    loss.backward()
    optimizer.step()
    picked = torch.argmax(outputs, dim=1)
    joined = torch.cat([outputs, outputs])
    for name, value in parts.items():
        pass
    for name, number in numbers.items():
        pass
    PROBE
'''


def _carries(expr: str) -> bool | None:
    model = build(cst.parse_module(LOOP.replace("PROBE", "probe = 0")))
    training = model.training_loops[0]
    probe = next(a for a in training.loop.assignments if a.names == ("probe",))
    return GraphReader(model, training).carries(cst.parse_expression(expr), probe.order, probe.conds)


@pytest.mark.parametrize(("expr", "expected"), [
    ("parts", True),  # element 1 of the same-file helper's return
    ("value", True),  # the values of `parts.items()`
    ("number", None),  # `.item()` inside the helper: a helper is read only for a graph, never for its absence
    ("joined", True),  # torch's own differentiable function of the model's outputs
    ("picked", False),  # argmax: indices, certainly no graph
    ("name", None),  # the keys
])
def test_values_followed_through_same_file_helpers_and_torch_functions(expr: str, expected: bool | None) -> None:
    assert _carries(expr) is expected


def test_a_validation_helper_without_no_grad_still_keeps_the_graph() -> None:
    path = Path(__file__).parent / "fixtures" / "must_not_flag" / "no_grad_decorated_validation_keeps_outputs.py"
    source = path.read_text()
    assert [f.code for f in check_source(source, select=["LC601"])] == []
    plain = source.replace("@torch.no_grad()\ndef validate", "def validate")
    assert plain != source
    # the list that gathers every validation batch, not the per-batch list of one batch's rows
    assert [(f.code, f.source_line.strip()) for f in check_source(plain, select=["LC601"])] == [
        ("LC601", "kept.append(torch.stack(picked))")]


CHANNELS = Path(__file__).parent / "fixtures" / "must_not_flag" / "logging_list_of_one_predictions_channels.py"


def test_a_list_made_fresh_before_the_loop_that_fills_it_is_kept_per_fill_only_over_tensors() -> None:
    source = CHANNELS.read_text()
    assert check_source(source, select=["LC601"]) == []
    # made fresh once, before the training loop: every logged prediction's graph stays in it
    once = source.replace("    model.train()\n", "    model.train()\n    show_pred = []\n").replace(
        "            show_pred = []\n", "").replace("            show_pred = make_grid", "            grid = make_grid")
    assert once != source
    assert [f.source_line.strip() for f in check_source(once, select=["LC601"])] == [
        "show_pred.append(preds[:, kk, :, :])"]
    # a loop over a loader between the fresh list and the append: one graph per batch gathered
    batches = source.replace("for kk in range(preds.shape[1]):", "for img, _ in loader:").replace(
        "preds[:, kk, :, :]", "model(img)")
    assert batches != source
    assert [f.source_line.strip() for f in check_source(batches, select=["LC601"])] == [
        "show_pred.append(model(img))"]
    # the channels counted by a `while` loop: still one prediction's tensors
    counted = source.replace("for kk in range(preds.shape[1]):",
                             "kk = 0\n            while kk < preds.shape[1]:").replace(
        "show_pred.append(preds[:, kk, :, :])", "show_pred.append(preds[:, kk, :, :])\n                kk += 1")
    assert counted != source
    assert check_source(counted, select=["LC601"]) == []


def test_a_helper_decorated_by_a_call_without_a_name_is_inlined() -> None:
    source = ("def make():\n    return lambda f: f\n\n\n@make()()\ndef step(x):\n    loss = model(x)\n"
              "    loss.backward()\n\n\nfor x in loader:\n    step(x)\n    optimizer.step()\n")
    assert [(f.line, f.code) for f in check_source(source)] == [(13, "LC103")]


_WINDOW_LIST = """
import torch


def train(model, loader, optimizer, accum):
    metrics = []
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.mse_loss(model(x), y)
        metric = loss * 2
        (loss / accum).backward()
        metrics.append(metric)
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            print(torch.stack(metrics).mean().item())
            metrics = []
"""


def test_a_list_emptied_every_window_keeps_one_windows_graphs_and_the_message_says_so() -> None:
    # torchdrug's engine: `metrics = []` at each step, so the graphs do not pile up over the run
    found = [f.message for f in check_source(_WINDOW_LIST, select=["LC601"])]
    assert found == ["`metric` still carries its autograd graph and is stored in `metrics` until it is emptied, "
                     "every N iterations: up to N iterations' graphs are kept at once; keep `.item()` or `.detach()` "
                     "instead"]
    never_emptied = [f.message for f in check_source(_WINDOW_LIST.replace("            metrics = []\n", ""),
                                                     select=["LC601"])]
    assert [m.split(": ")[1].split(";")[0] for m in never_emptied] == ["memory grows every step"]


_SUMMED_AFTER_BACKWARD = '''
import torch


def train(model, optimizer, batches, epochs):
    for epoch in range(epochs):
        model.train()
        loss, s = 0, 0
        for batch in batches:
            batch_loss = model(batch)
            optimizer.zero_grad()
            batch_loss.backward()
            optimizer.step()
            loss += batch_loss
            s += 1
        print(epoch, loss.item() / s)
'''


def test_a_back_propagated_loss_summed_over_the_epoch_keeps_only_graph_nodes_and_the_message_says_so() -> None:
    # MixGCF: `loss += batch_loss` after `batch_loss.backward()`: backward freed the saved activations,
    # what piles up is the graph's node objects (about 20 KB a step for a 3-layer MLP, measured on CPU);
    # the sum made anew every epoch (`loss, s = 0, 0`), that shape is reported only on request
    assert check_source(_SUMMED_AFTER_BACKWARD, select=["LC601"]) == []
    options = Options(graphs_after_backward=True)
    found = [f.message for f in check_text(_SUMMED_AFTER_BACKWARD, "train.py", frozenset({"LC601"}), options)]
    assert len(found) == 1 and found[0].endswith(
        "across iterations: memory grows every step (by the graph's nodes only: its backward already freed the "
        "saved activations); keep `.item()` or `.detach()` instead")
    # the model's outputs, never back-propagated themselves, keep their activations: no such note
    outputs = _SUMMED_AFTER_BACKWARD.replace("            loss += batch_loss\n", "            loss += model(batch)\n")
    found = [f.message for f in check_source(outputs, select=["LC601"])]
    assert len(found) == 1 and "nodes only" not in found[0] and "memory grows every step" in found[0]
