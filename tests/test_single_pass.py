"""LC105 and a data loop whose function the file runs once from module level."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "single_pass_main_bounded_by_updates.py"
CALL = '    print("updates:", main(parser.parse_args()))\n'


def test_a_function_called_once_from_module_level_is_one_pass() -> None:
    assert [f.code for f in check_source(FIXTURE.read_text(), select=["LC105"])] == []


def test_a_function_called_per_epoch_or_from_elsewhere_still_leaves_a_window() -> None:
    source = FIXTURE.read_text()
    assert CALL in source
    per_epoch = source.replace(CALL, "    for epoch in range(3):\n    " + CALL)
    not_called = source.replace(CALL, "    pass\n")
    for variant in (per_epoch, not_called):
        assert [f.code for f in check_source(variant, select=["LC105"])] == ["LC105"]


TRAINER = """
import torch
from torch import nn


class Trainer:
    def __init__(self, model, loader, grad):
        self.model, self.loader, self.grad = model, loader, grad
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def train(self):
        self.model.train()
        self.opt.zero_grad()
        for i, (x, y) in enumerate(self.loader):
            loss = nn.functional.mse_loss(self.model(x), y) / self.grad
            loss.backward()
            if (i + 1) % self.grad == 0:
                self.opt.step()
                self.opt.zero_grad()


if __name__ == "__main__":
    trainer = Trainer(nn.Linear(4, 1), [(torch.randn(2, 4), torch.randn(2, 1))] * 7, grad=2)
    trainer.train()
"""


def test_a_method_the_file_runs_once_on_its_instance_is_one_pass() -> None:
    # OpenThaiGPT's experiment: `trainer = Trainer(...)`, then `trainer.train()` once, whose loop is the run
    assert [f.code for f in check_source(TRAINER, select=["LC105"])] == []
    per_epoch = TRAINER.replace("    trainer.train()\n", "    for epoch in range(3):\n        trainer.train()\n")
    from_self = TRAINER.replace("                self.opt.zero_grad()\n",
                                "                self.opt.zero_grad()\n\n    def fit(self):\n"
                                "        for epoch in range(3):\n            self.train()\n")
    for variant in (per_epoch, from_self):
        assert [f.code for f in check_source(variant, select=["LC105"])] == ["LC105"]


def test_a_function_a_command_line_runner_calls_is_one_pass() -> None:
    # e2e_sae: `if __name__ == "__main__": fire.Fire(main)`, main calls train(...) once
    source = FIXTURE.read_text().replace(CALL, "    fire.Fire(main)\n")
    source = source.replace("import argparse\n", "import argparse\n\nimport fire\n")
    assert [f.code for f in check_source(source, select=["LC105"])] == []
    twice = source.replace("    fire.Fire(main)\n", "    fire.Fire(main)\n    for seed in range(3):\n"
                                                     "        sweep(main)\n")
    assert [f.code for f in check_source(twice, select=["LC105"])] == ["LC105"]
