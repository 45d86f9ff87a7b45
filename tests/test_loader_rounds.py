"""A loop over several loaders that draws one batch from each (`next(data_loader)`) and steps after
it makes one update per round of batches: not LC108. A loop over the batches of one loader with
the step after it still is."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent.parent / "rules" / "fixtures" / "LC108" / "one_batch_from_each_loader_then_step.py"
ROUND = """        for data_loader in dataloaders:
            torch.manual_seed(0)
            x, y = next(data_loader)
"""


def _lc108(source: str) -> list[int]:
    return [f.line for f in check_source(source, select=["LC108"])]


def test_one_batch_from_each_loader_then_a_step_is_not_flagged() -> None:
    source = FIXTURE.read_text()
    assert ROUND in source
    assert _lc108(source) == []


def test_every_batch_of_one_loader_then_a_step_is_flagged() -> None:
    source = FIXTURE.read_text().replace(ROUND, """        for x, y in dataloaders[0]:
            torch.manual_seed(0)
""")
    step = source.splitlines().index("        optimizer.step()") + 1
    assert _lc108(source) == [step]


def test_a_draw_from_another_iterator_does_not_make_a_round() -> None:
    source = FIXTURE.read_text().replace(ROUND, """        for data_loader in dataloaders:
            torch.manual_seed(0)
            x, y = next(dataloaders[0])
""")
    step = source.splitlines().index("        optimizer.step()") + 1
    assert _lc108(source) == [step]
