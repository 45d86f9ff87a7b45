"""`model, optimizer, scheduler, loader = accelerator.prepare(model, optimizer, scheduler, loader)`
hands back each object it is given, in order: what the loop iterates comes from the loader alone,
so a OneCycleLR schedule prepared beside it does not make the loader look endless (`cycle`), and a
loader made endless before it is prepared still is."""

from __future__ import annotations

import textwrap

from loopcheck.engine import check_text
from loopcheck.selection import resolve

LOOP = """
    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader


    def cycle(dl):
        while True:
            yield from dl


    def train(model, dataset, epochs, accum):
        accelerator = Accelerator()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        scheduler = SCHEDULER
        loader = LOADER
        model, optimizer, scheduler, loader = accelerator.prepare(model, optimizer, scheduler, loader)
        for epoch in range(epochs):
            for step, batch in enumerate(loader):
                accelerator.backward(model(**batch).loss / accum)
                if (step + 1) % accum == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
"""
ONE_CYCLE = "torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=1000)"
LINEAR = "torch.optim.lr_scheduler.LinearLR(optimizer, total_iters=1000)"
FINITE = "DataLoader(dataset, batch_size=8, shuffle=True)"
ENDLESS = "cycle(DataLoader(dataset, batch_size=8, shuffle=True))"


def _codes(scheduler: str, loader: str) -> list[str]:
    source = textwrap.dedent(LOOP).replace("SCHEDULER", scheduler).replace("LOADER", loader)
    return sorted(f.code for f in check_text(source, "train.py", resolve(select=["LC105"])))


def test_a_one_cycle_schedule_prepared_beside_the_loader_leaves_the_loader_finite() -> None:
    assert _codes(ONE_CYCLE, FINITE) == _codes(LINEAR, FINITE) == ["LC105"]


def test_a_loader_made_endless_before_it_is_prepared_stays_endless() -> None:
    assert _codes(ONE_CYCLE, ENDLESS) == _codes(LINEAR, ENDLESS) == []
