"""``self.training_step(model, inputs)`` in a subclass of ``transformers.Trainer`` that copies the
library's ``train()`` loop and does not override the method: the inherited method back-propagates
one micro-batch, its loss divided by ``gradient_accumulation_steps`` (``loopcheck.model.inherited``).
An override anywhere between the class and ``transformers.Trainer`` (in the file or a project base
class), another library's ``Trainer`` or a second base (a mixin) leaves the call unread."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from loopcheck.engine import check_source
from loopcheck.model import Kind, build
from tests.projects import write_project

LOOP = """
        def train(self):
            loader = self.get_train_dataloader()
            model = self.model
            model.zero_grad()
            for epoch in range(int(self.args.num_train_epochs)):
                for step, inputs in enumerate(loader):
                    tr_loss += self.training_step(model, inputs)
                    if (step + 1) % self.args.gradient_accumulation_steps == 0 or (
                        len(loader) <= self.args.gradient_accumulation_steps and (step + 1) == len(loader)
                    ):
                        self.optimizer.step()
                        self.lr_scheduler.step()
                        model.zero_grad()
"""


def _source(header: str, extra: str = "") -> str:
    return textwrap.dedent(header) + textwrap.indent(textwrap.dedent(LOOP), "    ") + textwrap.dedent(extra)


def _inherited(source: str) -> list[str]:
    model = build(cst.parse_module(source), source)
    return [e.inherited for e in model.events(Kind.BACKWARD)]


@pytest.mark.parametrize("header", [
    "import transformers\n\n\nclass Trainer(transformers.Trainer):\n",
    "from transformers import Trainer\n\n\nclass CLTrainer(Trainer):\n",
    "from transformers import Trainer as HFTrainer\n\n\nclass MyTrainer(HFTrainer):\n",
    "import transformers as tr\n\n\nclass MyTrainer(tr.Trainer):\n",
    "from transformers.trainer import Trainer\n\n\nclass Base(Trainer):\n    pass\n\n\nclass MyTrainer(Base):\n",
])
def test_inherited_training_step_back_propagates(header: str) -> None:
    source = _source(header)
    assert _inherited(source) == ["transformers.Trainer.training_step"]
    found = check_source(source, "trainer.py")
    assert [f.code for f in found] == ["LC105"]
    assert "the backward is in the inherited `transformers.Trainer.training_step`" in found[0].message


OVERRIDE = """
    def training_step(self, model, inputs):
        with torch.no_grad():
            return model(**inputs)[0].detach()
"""


@pytest.mark.parametrize("header", [
    # another library's Trainer (Lightning's has no such method to inherit)
    "from pytorch_lightning import Trainer\n\n\nclass MyTrainer(Trainer):\n",
    # a second base may bring its own training_step
    "from transformers import Trainer\n\n\nclass MyTrainer(DistillMixin, Trainer):\n",
    # overridden by a base class of the file
    "import torch\nfrom transformers import Trainer\n\n\nclass Base(Trainer):\n"
    + textwrap.indent(textwrap.dedent(OVERRIDE), "    ") + "\n\nclass MyTrainer(Base):\n",
    # a base class of another module, unknown here
    "from .base import BaseTrainer\n\n\nclass MyTrainer(BaseTrainer):\n",
    # no class: a function of the module calls its own `self`
    "import transformers\n\n\nclass Trainer:\n",
])
def test_no_inherited_backward(header: str) -> None:
    source = _source(header)
    assert _inherited(source) == []
    assert check_source(source, "trainer.py") == []


def test_overridden_in_the_class_itself() -> None:
    source = _source("import torch\nfrom transformers import Trainer\n\n\nclass MyTrainer(Trainer):\n",
                     textwrap.indent(textwrap.dedent(OVERRIDE), "    "))
    assert _inherited(source) == []
    assert check_source(source, "trainer.py") == []


SUB = _source("from src.base_trainer import BaseTrainer\n\n\nclass KernelTrainer(BaseTrainer):\n")


@pytest.mark.parametrize(("base", "flagged"), [
    ("import transformers\n\n\nclass BaseTrainer(transformers.Trainer):\n    pass\n", True),
    ("from transformers import Trainer\n\n\nclass Mid(Trainer):\n    pass\n\n\nclass BaseTrainer(Mid):\n    pass\n",
     True),
    ("import transformers\n\n\nclass BaseTrainer(transformers.Trainer):\n"
     "    def training_step(self, model, inputs):\n        return model(**inputs)[0].detach()\n", False),
    ("class BaseTrainer:\n    pass\n", False),
])
def test_a_project_base_class_derives_from_the_trainer(project: Path, run_cli, base: str, flagged: bool) -> None:
    write_project(project, {"src/__init__.py": "", "src/base_trainer.py": base, "src/trainer.py": SUB})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--no-cache", "src/trainer.py")
    found = [line for line in out.splitlines() if ": LC" in line]
    assert [line.split(" ")[1] for line in found] == (["LC105"] if flagged else [])
