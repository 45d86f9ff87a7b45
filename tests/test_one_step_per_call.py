"""A loop of a function that back-propagates the pieces of one step (GradCache's chunks of one batch)
and sums their losses into a total the function binds before it on every call keeps one step's
graphs at most: not LC601. A loop over a loader, or one that steps, still gathers a graph per batch."""
from __future__ import annotations

from pathlib import Path

from loopcheck.config import Options
from loopcheck.engine import check_source, check_text

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "grad_cache_chunk_losses_summed_per_call.py"


def lc601(source: str) -> list[int]:
    return [f.line for f in check_source(source, "trainer.py", select=["LC601"])]


def test_the_chunks_of_one_step() -> None:
    assert lc601(FIXTURE.read_text()) == []


def test_a_loop_over_a_loader_keeps_a_graph_per_batch() -> None:
    # one pass's back-propagated losses in a total made anew before it: the opt-in `after-backward` shape
    source = FIXTURE.read_text().replace("enumerate(chunked_inputs)", "enumerate(self.get_train_dataloader())")
    assert lc601(source) == []
    found = check_text(source, "trainer.py", frozenset({"LC601"}), Options(graphs_after_backward=True))
    assert [f.line for f in found] == [38]


def test_a_loop_that_steps_keeps_a_graph_per_step() -> None:
    source = FIXTURE.read_text().replace("            total_loss += lm_loss\n",
                                         "            self.optimizer.step()\n            total_loss += lm_loss\n")
    assert lc601(source) == [39]


def test_a_total_the_call_does_not_bind() -> None:
    source = FIXTURE.read_text().replace("grad_cache, total_loss = self.gc.build_cache(cls_hiddens)",
                                         "grad_cache, _ = self.gc.build_cache(cls_hiddens)")
    source = source.replace("total_loss", "self.total_loss")
    assert lc601(source) == [38]
