"""LC105 and the last-batch test that holds only in an epoch no longer than the window, and a loop
whose only backward runs on an epoch's first batch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parents[1] / "rules" / "fixtures" / "LC105" / "short_epoch_flush_still_carries_tail.py"
SHORT = ("len(epoch_iterator) <= gradient_accumulation_steps\n"
         "                and (step + 1) == len(epoch_iterator)")


def _codes(source: str) -> list[str]:
    return [f.code for f in check_source(source, select=["LC105"])]


def _windows(source: str, tmp_path: Path) -> str:
    script = tmp_path / "train.py"
    script.write_text(source)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout.strip()


def test_the_short_epoch_flush_leaves_a_longer_epoch_carrying_its_tail(tmp_path: Path) -> None:
    source = FIXTURE.read_text()
    assert SHORT in source
    [finding] = check_source(source, select=["LC105"])
    assert "carried into the next epoch's first step" in finding.message
    assert "its last-batch test holds only in an epoch of at most N batches" in finding.message
    assert _windows(source, tmp_path) == "[4, 4, 4, 5, 4, 4, 5, 4, 4]"


def test_a_last_batch_test_for_every_epoch_steps_the_tail(tmp_path: Path) -> None:
    flushed = FIXTURE.read_text().replace(SHORT, "(step + 1) == len(epoch_iterator)")
    assert _codes(flushed) == []
    assert _windows(flushed, tmp_path) == "[4, 4, 4, 1, 4, 4, 4, 1, 4, 4, 4, 1]"


def test_a_length_compared_with_another_number_is_not_read() -> None:
    other = FIXTURE.read_text().replace("len(epoch_iterator) <= gradient_accumulation_steps",
                                        "len(epoch_iterator) <= num_train_epochs")
    assert _codes(other) == []


def test_a_backward_on_the_first_batch_only_accumulates_no_window() -> None:
    source = FIXTURE.read_text()
    backward = "            loss.backward()\n"
    assert backward in source
    probe = source.replace(backward, "            if step == 0:\n                loss.backward()\n")
    assert _codes(probe) == []
    assert _codes(source.replace(backward, "            if step > 0:\n                loss.backward()\n")) == ["LC105"]
