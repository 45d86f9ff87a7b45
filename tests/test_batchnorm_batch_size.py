"""LC503 reads the per-GPU batch the file trains with: a literal set only for a run that does not
train (the ``else:`` of ``if training:``) is not that batch."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "batchnorm_ddp_large_batch_small_eval_branch.py"


def lc503(source: str) -> list[int]:
    return [f.line for f in check_source(source, "fine_tune.py", select=["LC503"])]


def test_the_evaluation_branch_batch_is_not_the_training_batch() -> None:
    assert lc503(FIXTURE.read_text()) == []


def test_a_small_training_batch_still_reports() -> None:
    source = FIXTURE.read_text()
    swapped = source.replace("batch_size = 256", "batch_size = @").replace("batch_size = 16", "batch_size = 256")
    swapped = swapped.replace("batch_size = @", "batch_size = 16")
    assert swapped != source
    assert lc503(swapped) == [14]  # 16 per GPU while training


def test_a_negated_training_flag_picks_its_body_as_the_evaluation_run() -> None:
    source = FIXTURE.read_text().replace(
        "    if training:\n        batch_size = 256\n    else:\n        batch_size = 16\n",
        "    batch_size = 256\n    if not training:\n        batch_size = 16\n")
    assert "if not training:" in source
    assert lc503(source) == []
    assert lc503(source.replace("if not training:", "if args['small']:")) == [14]


def lc503_messages(source: str) -> list[str]:
    return [f.message.split(": ", 1)[1] for f in check_source(source, "fine_tune.py", select=["LC503"])]


def test_the_message_says_small_only_where_the_file_states_the_batch() -> None:
    small = FIXTURE.read_text().replace("batch_size = 256", "batch_size = 8")
    assert lc503_messages(small) == ["every GPU normalises with its own small batch's statistics "
                                     "(8 samples, as this file states it)"]
    # PAWS's SNN fine-tuning reads its batch from a YAML config: whether it is small is not visible
    from_config = FIXTURE.read_text().replace("batch_size = 256", "batch_size = args['batch_size']")
    from_config = from_config.replace("batch_size = 16", "batch_size = args['eval_batch_size']")
    assert lc503_messages(from_config) == ["every GPU normalises with its own batch's statistics, noisy where the "
                                           "per-GPU batch is small (this file does not state its size)"]


EXTRACTION = '''
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader


def main(args, rank, train_set, extract_set):
    model = nn.Sequential(nn.Conv1d(40, 256, 5), nn.BatchNorm1d(256), nn.ReLU()).cuda(rank)
    model = DDP(model, device_ids=[rank])
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    extract_loader = DataLoader(extract_set, batch_size=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            embeddings = [model(x) for (x,) in extract_loader]
'''


def test_a_loader_no_training_loop_iterates_states_no_training_batch() -> None:
    assert lc503_messages(EXTRACTION) == [
        "every GPU normalises with its own batch's statistics, noisy where the per-GPU batch is small (this file "
        "does not state its size)"]
    trained_on_it = EXTRACTION.replace("for x, y in train_loader:", "for x, y in extract_loader:")
    assert lc503_messages(trained_on_it) == [
        "every GPU normalises with its own small batch's statistics (1 samples, as this file states it)"]
