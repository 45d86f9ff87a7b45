"""An accumulation count that is a parameter of the script's training function, with an inert
default, that the script's own entry point leaves out (``def train_diffusion(...,
gradient_accumulation_steps=1)``, run as ``train_diffusion(resume_from=args.resume_from)``) is 1 in
every run the script makes, though a sibling script gives its parameter of that name another
default: the accumulation findings are not reported. A call that passes it, a parser that makes
options of parameters, or another module importing the script keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.projects import write_project

SCRIPT = """
    import argparse

    import torch
    from accelerate import Accelerator


    def train_diffusion(model, loader, resume_from=None, gradient_accumulation_steps={default}):
        accelerator = Accelerator(gradient_accumulation_steps=gradient_accumulation_steps)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(batch).mean()
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--resume_from", type=str, default=None)
        args = parser.parse_args()
        {entry}
"""


def _clips(run_cli, path: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--no-cache", "--select", "LC107", path)
    return [line for line in out.splitlines() if " LC107 " in line]


@pytest.mark.parametrize(("entry", "extra", "found"), [
    ("train_diffusion(None, None, resume_from=args.resume_from)", {}, 0),
    ("train_diffusion(None, None, resume_from=args.resume_from, gradient_accumulation_steps=4)", {}, 1),
    ("train_diffusion(None, None, args.resume_from, 4)", {}, 1),
    ("import fire; fire.Fire(train_diffusion)", {}, 1),
    ("train_diffusion(None, None, resume_from=args.resume_from)", {"sweep.py": "from train import train_diffusion\n"}, 1),
])
def test_a_parameter_the_scripts_entry_point_leaves_out(project: Path, run_cli, entry: str,
                                                         extra: dict[str, str], found: int) -> None:
    write_project(project, {"train.py": SCRIPT.format(default=1, entry=entry),
                            "train_256.py": SCRIPT.format(default=4, entry="train_diffusion(None, None)"), **extra})
    assert len(_clips(run_cli, "train.py")) == found
    assert len(_clips(run_cli, "train_256.py")) == 1  # its default accumulates
