"""Whether eval mode matters for a model built by a method of the estimator's own class."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.engine import check_source

FIXTURES = Path(__file__).parent / "fixtures" / "must_not_flag"


@pytest.mark.parametrize("name", ["eval_mode_inert_built_by_method.py", "eval_mode_inert_sequential_built_by_method.py"])
def test_a_builder_method_with_a_mode_dependent_layer_still_leaks(name: str) -> None:
    source = (FIXTURES / name).read_text()
    assert [f.code for f in check_source(source, select=["LC605"])] == []
    with_dropout = source.replace("nn.Tanh(),", "nn.Dropout(0.5),").replace(
        "batch_first=True)", "batch_first=True, num_layers=2, dropout=0.2)")
    assert with_dropout != source
    assert [f.code for f in check_source(with_dropout, select=["LC605"])] == ["LC605"]


def test_a_builder_method_that_returns_an_unknown_module_still_leaks() -> None:
    source = (FIXTURES / "eval_mode_inert_built_by_method.py").read_text().replace(
        "return RNNModel(self.vocab_size, self.embed_dim, self.hidden_dim, self.n_classes_)",
        "return torch.hub.load('repo', 'model')")
    assert [f.code for f in check_source(source, select=["LC605"])] == ["LC605"]


def test_a_model_the_file_only_moves_is_unknown() -> None:
    # `model = model.to(device)` is no construction: the module came from elsewhere (a helper's
    # tuple, an argument) and may hold dropout
    moved = "import torch\n\ndef fit(model, loader):\n    model = model.to('cpu')\n" \
            "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    model.train()\n" \
            "    for i, (x, y) in enumerate(loader):\n        opt.zero_grad()\n        loss = model(x).sum()\n" \
            "        loss.backward()\n        opt.step()\n        if i % 10 == 0:\n            model.eval()\n"
    assert [f.code for f in check_source(moved, select=["LC605"])] == ["LC605"]
    built = moved.replace("model = model.to('cpu')", "model = torch.nn.Linear(4, 1).to('cpu')")
    assert built != moved
    assert [f.code for f in check_source(built, select=["LC605"])] == []


@pytest.mark.parametrize("exit_statement", ["break", "continue"])
def test_eval_before_an_exit_still_leaks_without_train_at_the_iteration_top(exit_statement: str) -> None:
    # the steps after `if done: validate(); break` never follow its eval(); but with train() only
    # before the loop, the periodic validation at the end of the iteration leaks into the next one
    source = (FIXTURES / "validate_then_break_train_mode_at_iteration_top.py").read_text()
    source = source.replace("                    break\n", f"                    {exit_statement}\n")
    assert [f.code for f in check_source(source, select=["LC605"])] == []
    moved = source.replace("                self.model.train()\n", "").replace(
        "        flag = True\n", "        flag = True\n        self.model.train()\n")
    assert moved.count("self.model.train()") == 1
    assert [f.code for f in check_source(moved, select=["LC605"])] == ["LC605"]


def test_eval_between_forward_and_step_leaks_only_where_a_forward_follows_it() -> None:
    # the step after the eval() back-propagates a loss computed before it: harmless while every
    # iteration starts with train(); a leak once train() runs only before the loop, or once the
    # loss is computed after the eval()
    source = (FIXTURES / "eval_between_forward_and_step_train_mode_at_iteration_top.py").read_text()
    assert [f.code for f in check_source(source, select=["LC605"])] == []
    train_once = source.replace("    model.train()\n    optimizer.zero_grad()\n", "    optimizer.zero_grad()\n").replace(
        "    modes = []", "    model.train()\n    modes = []")
    assert train_once.count("    model.train()") == 1
    assert [f.code for f in check_source(train_once, select=["LC605"])] == ["LC605"]
    forward_after = source.replace("    loss = F.mse_loss(model(x), y)\n    if do_eval:\n        evaluate(model, x, y)\n",
                                   "    if do_eval:\n        evaluate(model, x, y)\n    loss = F.mse_loss(model(x), y)\n")
    assert forward_after != source
    assert [f.code for f in check_source(forward_after, select=["LC605"])] == ["LC605"]
    added_after = source.replace("    loss.backward()\n", "    loss = loss + 0.1 * model(x).pow(2).mean()\n"
                                 "    loss.backward()\n")
    assert added_after != source
    assert [f.code for f in check_source(added_after, select=["LC605"])] == ["LC605"]
    # the eval() between the backward and the step: the step's gradients predate it too
    after_backward = source.replace("    if do_eval:\n        evaluate(model, x, y)\n    loss.backward()\n",
                                    "    loss.backward()\n    if do_eval:\n        evaluate(model, x, y)\n")
    assert after_backward != source
    assert [f.code for f in check_source(after_backward, select=["LC605"])] == []
    after_backward_train_once = after_backward.replace(
        "    model.train()\n    optimizer.zero_grad()\n", "    optimizer.zero_grad()\n")
    assert after_backward_train_once != after_backward
    assert [f.code for f in check_source(after_backward_train_once, select=["LC605"])] == ["LC605"]
    inline_forward = source.replace("    loss.backward()\n", "    F.mse_loss(model(x), y).backward()\n")
    assert inline_forward != source
    assert [f.code for f in check_source(inline_forward, select=["LC605"])] == ["LC605"]


_NORM_CLASS = "eval_mode_inert_norm_class_through_constructors.py"


@pytest.mark.parametrize(("old", "new"), [
    # running statistics make an InstanceNorm mode-dependent
    ("track_running_stats=False", "track_running_stats=True"),
    # a dropout handed down as the activation
    ("self.act = act = nn.ELU()", "self.act = act = nn.Dropout(0.1)"),
    # the block keeps its BatchNorm default where a construction leaves the norm class out
    ("ResidualBlock(features, num_classes, act=act, normalization=self.norm),",
     "ResidualBlock(features, num_classes, act=act),"),
    # the norm class the top model hands down is a BatchNorm one
    ("        self.norm = ConditionalInstanceNorm2d\n", "        self.norm = ConditionalBatchNorm2d\n"),
    # a default activation that reads the mode (RReLU), left to its default by the construction
    ("normalizer, act=nn.ReLU()):", "normalizer, act=nn.RReLU()):"),
    # a container filled with a module that comes from elsewhere
    ("self.norms.append(normalizer(features, num_classes))", "self.norms.append(SHARED_NORM)"),
    # a module-level builder that unpacks a layer list holding a dropout
    ("    return nn.Conv2d(in_planes, out_planes, kernel_size=3, padding=1)\n",
     "    layers = [nn.Conv2d(in_planes, out_planes, kernel_size=3, padding=1)]\n"
     "    layers.append(nn.Dropout2d(0.1))\n    return nn.Sequential(*layers)\n"),
    # a getattr that may reach a module passed in from outside
    ("self.n_stages = n_stages\n", "self.n_stages = n_stages\n        self.extra_conv = extra\n"),
])
def test_a_mode_dependent_layer_handed_down_through_constructors_still_leaks(old: str, new: str) -> None:
    source = (FIXTURES / _NORM_CLASS).read_text()
    assert [f.code for f in check_source(source, select=["LC605"])] == []
    changed = source.replace(old, new)
    if "extra_conv" in new:
        changed = changed.replace("normalizer, act=nn.ReLU()):", "normalizer, act=nn.ReLU(), extra=None):")
    assert changed != source
    assert [f.code for f in check_source(changed, select=["LC605"])] == ["LC605"]


def test_a_layer_class_handed_to_a_builder_method_is_read() -> None:
    # `self._make_layer(Block, ...)` builds Block in the helper: its dropout makes the model mode-dependent;
    # with a mode-free block the same model is inert
    source = (Path(__file__).parents[1] / "rules" / "fixtures" / "LC605" /
              "layer_class_handed_to_a_builder_method.py").read_text()
    assert [f.code for f in check_source(source, select=["LC605"])] == ["LC605"]
    inert = source.replace("self.drop = nn.Dropout(0.5)", "self.drop = nn.Identity()")
    assert inert != source
    assert [f.code for f in check_source(inert, select=["LC605"])] == []


def test_a_layer_list_built_by_a_builder_method_is_read() -> None:
    # `layers.append(nn.Dropout(p))` then `nn.Sequential(*layers)` in the estimator's own builder method:
    # mode-dependent; the same list of plain layers is inert
    source = (Path(__file__).parents[1] / "rules" / "fixtures" / "LC605" /
              "layer_list_built_by_a_builder_method.py").read_text()
    assert [f.code for f in check_source(source, select=["LC605"])] == ["LC605"]
    inert = source.replace("layers.append(nn.Dropout(self.dropout))", "layers.append(nn.Identity())")
    assert inert != source
    assert [f.code for f in check_source(inert, select=["LC605"])] == []
    unknown = inert.replace("layers.append(nn.Identity())", "layers.extend(self.extra_layers)")
    assert unknown != inert
    assert [f.code for f in check_source(unknown, select=["LC605"])] == ["LC605"]


def test_a_component_left_in_eval_mode_leaks_once_its_own_update_follows() -> None:
    # one helper trains each component with the optimizer handed to it: the world model's update
    # after `tokenizer.eval()` does not train the tokenizer; its own next update does
    source = (FIXTURES / "frozen_component_eval_between_component_updates.py").read_text()
    assert [f.code for f in check_source(source, select=["LC605"])] == []
    train_before_the_loop = source.replace("        self.agent.train()\n        self.agent.zero_grad()\n",
                                           "        self.agent.zero_grad()\n").replace(
        "        for epoch in range(1, self.epochs + 1):\n",
        "        self.agent.train()\n        for epoch in range(1, self.epochs + 1):\n")
    assert train_before_the_loop.count("        self.agent.train()\n") == 1
    assert "tokenizer.eval()" in " ".join(f.message for f in check_source(train_before_the_loop, select=["LC605"]))
    trained_again = source.replace(
        "        self.agent.world_model.eval()\n",
        "        self.agent.world_model.eval()\n"
        "        self.train_component(self.agent.tokenizer, self.optimizer_tokenizer, steps_per_epoch=1, grad_acc_steps=1)\n")
    assert trained_again != source
    assert [f.code for f in check_source(trained_again, select=["LC605"])] == ["LC605"]


ZERO_DROPOUT = FIXTURES / "eval_mode_inert_zero_dropout_weight_norm.py"


@pytest.mark.parametrize(("old", "new"), [
    # a caller that sets the rate: dropout runs in training mode only
    ("LVCBlock(channels, cond_channels)", "LVCBlock(channels, cond_channels, kpnet_dropout=0.1)"),
    ("kpnet_dropout=0.0):", "kpnet_dropout=0.2):"),  # the default the constructions leave
    ("nn.Dropout(kpnet_dropout)", "nn.Dropout(0.5)"),
    # spectral norm's power iteration runs only in training mode
    ("nn.utils.weight_norm(nn.Conv1d(channels, channels, 3, padding=1))",
     "nn.utils.spectral_norm(nn.Conv1d(channels, channels, 3, padding=1))"),
    ('activation="LeakyReLU"', 'activation="RReLU"'),  # random slopes in training mode
])
def test_a_rate_of_zero_or_weight_norm_is_inert_only_as_written(old: str, new: str) -> None:
    source = ZERO_DROPOUT.read_text()
    assert [f.code for f in check_source(source, select=["LC605"])] == []
    changed = source.replace(old, new)
    assert changed != source
    assert [f.code for f in check_source(changed, select=["LC605"])] == ["LC605"]


OPTION_RATE = '''
import argparse
import torch
import torch.nn.functional as F


class LinkPredictor(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, dropout):
        super().__init__()
        self.lins = torch.nn.ModuleList([torch.nn.Linear(in_channels, hidden_channels),
                                         torch.nn.Linear(hidden_channels, 1)])
        self.dropout = dropout

    def forward(self, x):
        x = F.relu(self.lins[0](x))
        x = F.dropout(x, p=self.dropout, training=self.training)
        return torch.sigmoid(self.lins[1](x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dropout", type=float, default=0.0)
    args = parser.parse_args()
    predictor = LinkPredictor(8, 16, args.dropout)
    optimizer = torch.optim.Adam(predictor.parameters())
    predictor.train()
    for epoch, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        F.binary_cross_entropy(predictor(x), y).backward()
        optimizer.step()
        if epoch % 10 == 0:
            predictor.eval()
'''
LEAK = ("`predictor.eval()` runs inside the training loop and nothing calls `predictor.train()` before the next "
        "training step: from then on it trains in eval mode (dropout off, BatchNorm frozen, where it has them)")
# where the file shows the module's only mode-dependent layers are dropouts, the message names only them
LEAK_DROPOUT = ("`predictor.eval()` runs inside the training loop and nothing calls `predictor.train()` before the "
                "next training step: from then on it trains in eval mode (dropout off)")


def test_a_dropout_rate_left_at_an_option_default_of_zero_is_said_in_the_message() -> None:
    # ogb's link predictors: inert as shipped, a leak once the user raises --dropout
    assert [f.message for f in check_source(OPTION_RATE, select=["LC605"])] == [
        LEAK_DROPOUT + " (only when `args.dropout` > 0; its default is 0.0)"]
    raised = OPTION_RATE.replace("default=0.0", "default=0.5")
    assert [f.message for f in check_source(raised, select=["LC605"])] == [LEAK]
    assigned = OPTION_RATE.replace("    predictor = Link", "    args.dropout = 0.3\n    predictor = Link")
    assert [f.message for f in check_source(assigned, select=["LC605"])] == [LEAK]
    literal = OPTION_RATE.replace("LinkPredictor(8, 16, args.dropout)", "LinkPredictor(8, 16, 0.0)")
    assert check_source(literal, select=["LC605"]) == []
    # another read of `self.training` than dropout's own: the mode matters whatever the rate
    reads_training = literal.replace("return torch.sigmoid",
                                     "x = x * 2 if self.training else x\n        return torch.sigmoid")
    assert [f.message for f in check_source(reads_training, select=["LC605"])] == [LEAK]
