"""Which ``eval()`` calls in a training loop LC605 counts as a leak into the next training steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.engine import check_source
from loopcheck.project.facts import extract

FIXTURES = Path(__file__).parent / "fixtures" / "must_not_flag"
RULE_FIXTURES = Path(__file__).parent.parent / "rules" / "fixtures" / "LC605"


def _codes(source: str) -> list[str]:
    return [f.code for f in check_source(source, select=["LC605"])]


def test_an_evaluation_helper_that_builds_its_own_network_leaves_the_trained_one_alone() -> None:
    source = (FIXTURES / "eval_mode_helper_builds_its_own_model.py").read_text()
    assert _codes(source) == []
    # the same helper handed the trained network puts that one in eval mode
    handed = source.replace("def eval(self, loader, state_dict):\n        net = Net(self.dim)\n"
                            "        net.load_state_dict(state_dict)\n", "def eval(self, loader, net):\n") \
        .replace("self.eval(val_loader, state_dict=copy.deepcopy(net.state_dict()))", "self.eval(val_loader, net)")
    assert handed.count("def eval(self, loader, net):") == 1 and "self.eval(val_loader, net)" in handed
    assert _codes(handed) == ["LC605"]


def test_a_helper_local_rebound_to_the_trained_model_still_leaks() -> None:
    source = (FIXTURES / "eval_mode_helper_builds_its_own_model.py").read_text()
    aliased = source.replace("def eval(self, loader, state_dict):\n        net = Net(self.dim)\n"
                             "        net.load_state_dict(state_dict)\n",
                             "def eval(self, loader, model):\n        net = model\n") \
        .replace("self.eval(val_loader, state_dict=copy.deepcopy(net.state_dict()))", "self.eval(val_loader, net)")
    assert "net = model" in aliased
    assert _codes(aliased) == ["LC605"]


def test_eval_at_the_top_of_every_training_iteration_is_on_purpose() -> None:
    source = (FIXTURES / "eval_mode_kept_for_training_on_purpose.py").read_text()
    assert _codes(source) == []


@pytest.mark.parametrize("old, new", [
    # an evaluation every 100 iterations, before that iteration's training
    ("            self.model.eval()\n",
     "            if i % 100 == 0:\n                self.model.eval()\n                self.evaluate()\n"),
    # a validation forward under no_grad between the eval() and the training forward
    ("            self.criterion.train()\n",
     "            self.criterion.train()\n            with torch.no_grad():\n                self.model(inputs)\n"),
    # a validation loop between them
    ("            self.criterion.train()\n",
     "            self.criterion.train()\n            for v in self.val_inputs:\n                self.model(v)\n"),
    # a helper that evaluates (and leaves eval mode) first in the iteration
    ("            self.model.eval()\n", "            self.evaluate()\n"),
])
def test_eval_before_training_with_an_evaluation_in_between_still_leaks(old: str, new: str) -> None:
    source = (FIXTURES / "eval_mode_kept_for_training_on_purpose.py").read_text()
    changed = source.replace(old, new, 1)
    assert changed != source
    changed += "\n    def evaluate(self):\n        self.model.eval()\n        with torch.no_grad():\n            return self.model(self.val)\n"
    assert _codes(changed) == ["LC605"]


def test_a_discriminator_put_in_eval_mode_for_the_generator_step_still_leaks() -> None:
    gan = ("import torch\n\nopt_d = torch.optim.Adam(discriminator.parameters())\n"
           "opt_g = torch.optim.Adam(generator.parameters())\nfor real in loader:\n"
           "    discriminator.eval()\n    opt_g.zero_grad()\n    (-discriminator(generator(z))).mean().backward()\n"
           "    opt_g.step()\n    opt_d.zero_grad()\n    discriminator(real).mean().backward()\n    opt_d.step()\n")
    assert _codes(gan) == ["LC605"]
    # with the discriminator's own step first, eval() is the training mode chosen for it
    own_first = gan.replace("    opt_g.zero_grad()\n    (-discriminator(generator(z))).mean().backward()\n"
                            "    opt_g.step()\n", "").replace("    opt_d.step()\n",
                                                             "    opt_d.step()\n    opt_g.zero_grad()\n"
                                                             "    (-discriminator(generator(z))).mean().backward()\n"
                                                             "    opt_g.step()\n")
    assert own_first != gan
    assert _codes(own_first) == []


def test_train_mode_off_by_keyword_is_eval_mode() -> None:
    source = (RULE_FIXTURES / "validation_mode_off_by_keyword.py").read_text()
    findings = check_source(source, select=["LC605"])
    assert [(f.code, f.line) for f in findings] == [("LC605", 28)]
    assert "`model.train(mode=False)` runs" in findings[0].message
    fixed = source.replace("    total = 0.0\n", "    model.train(mode=True)\n    total = 0.0\n", 1)
    assert fixed != source
    assert _codes(fixed) == []


def test_an_imported_helper_that_switches_off_by_keyword_leaves_eval_mode() -> None:
    facts = extract("def evaluate(model, loader):\n    model.train(mode=False)\n    return 0\n\n"
                    "def restore(model):\n    model.train(mode=False)\n    model.train(mode=True)\n", "engine.py")
    assert facts.functions["evaluate"].evals == (0,)
    assert "restore" not in facts.functions or facts.functions["restore"].evals == ()


def test_an_activation_handed_on_from_elsewhere_counts_as_an_activation() -> None:
    source = (FIXTURES / "eval_mode_inert_activation_handed_on.py").read_text()
    assert _codes(source) == []
    # a dropout written into the construction is read as one
    dropout = source.replace("hidden_activation=self.hidden_activation)", "hidden_activation=nn.Dropout(0.5))")
    assert dropout != source
    assert _codes(dropout) == ["LC605"]
    # a slot that is not an activation (a block handed on from elsewhere) may hold anything
    block = source.replace("hidden_activation", "block")
    assert _codes(block) == ["LC605"]


def test_an_evaluation_method_that_takes_self_model_again_leaks_into_the_loop_on_its_alias() -> None:
    # `model = self.model` in train() and again in evaluate(): one module under two names
    source = (RULE_FIXTURES / "evaluate_method_reads_self_model.py").read_text()
    assert _codes(source) == ["LC605"]
    restored = (FIXTURES / "evaluate_method_reads_self_model_restored.py").read_text()
    assert "model.train()\n" in restored.split("def eval_model")[0].split("print(global_step, results)")[1]
    assert _codes(restored) == []
    # an evaluation of another module (an EMA copy the class keeps) leaves the trained one alone
    ema = source.replace("    def evaluate(self, eval_dataset):\n        model = self.model\n",
                         "    def evaluate(self, eval_dataset):\n        model = self.ema_model\n")
    assert "model = self.ema_model" in ema
    assert _codes(ema) == []
    # and so does the same method on a copy
    copied = source.replace("    def evaluate(self, eval_dataset):\n        model = self.model\n",
                            "    def evaluate(self, eval_dataset):\n        model = copy.deepcopy(self.model)\n")
    assert "copy.deepcopy(self.model)" in copied
    assert _codes(copied) == []


def test_a_method_handed_the_model_as_an_argument_is_not_read_through_the_alias() -> None:
    # a zeroth-order trainer's `zo_forward(model, inputs)` runs its forward in eval mode on purpose
    # (MeZO): a module that reaches a helper as an argument is followed only to the caller's name
    source = (RULE_FIXTURES / "evaluate_method_reads_self_model.py").read_text()
    handed = source.replace("results = self.eval_model(eval_dataset)", "results = self.eval_model(model, eval_dataset)") \
        .replace("def eval_model(self, eval_dataset):\n        result = self.evaluate(eval_dataset)",
                 "def eval_model(self, model, eval_dataset):\n        result = self.evaluate(model, eval_dataset)") \
        .replace("    def evaluate(self, eval_dataset):\n        model = self.model\n", "    def evaluate(self, model, eval_dataset):\n")
    assert "def evaluate(self, model, eval_dataset):" in handed and "self.evaluate(model, eval_dataset)" in handed
    assert _codes(handed) == []
