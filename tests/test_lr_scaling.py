"""LC304/LC305 with a declared reference in [tool.loopcheck.lr-scaling]."""

from __future__ import annotations

import textwrap
from pathlib import Path

from loopcheck.config import LrScaling, Options
from loopcheck.engine import check_text

REFERENCE = Options(lr_scaling=LrScaling(reference_batch_size=256, reference_lr=0.1))
LOOP = """
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default={lr})
args = parser.parse_args()
loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / 4
    loss.backward()
    if (i + 1) % 4 == 0 or (i + 1) == len(loader):
        optimizer.step()
        optimizer.zero_grad()
"""


def _codes(source: str, options: Options) -> list[tuple[int, str]]:
    found = check_text(textwrap.dedent(source), "train.py", frozenset({"LC304", "LC305"}), options)
    return [(f.line, f.code) for f in found]


def test_lr_following_the_linear_rule_for_the_effective_batch() -> None:
    # effective batch 64 x 4 = 256: the reference LR
    assert _codes(LOOP.format(lr="0.1"), REFERENCE) == []


def test_lr_not_following_the_rule_is_reported_at_the_optimizer() -> None:
    assert _codes(LOOP.format(lr="0.025"), REFERENCE) == [(6, "LC304")]


def test_sqrt_rule() -> None:
    sqrt = Options(lr_scaling=LrScaling(reference_batch_size=64, reference_lr=0.1, rule="sqrt"))
    assert _codes(LOOP.format(lr="0.2"), sqrt) == []  # sqrt(256 / 64) = 2
    assert _codes(LOOP.format(lr="0.4"), sqrt) == [(6, "LC304")]


def test_silent_without_a_reference_or_under_data_parallel() -> None:
    assert _codes(LOOP.format(lr="0.025"), Options()) == []
    ddp = LOOP.format(lr="0.025") + "model = DistributedDataParallel(model)\n"
    assert _codes(ddp, REFERENCE) == []


def test_warmup_needed_for_a_large_lr() -> None:
    big = LOOP.format(lr="1.6")  # 16x the reference
    assert (6, "LC305") in _codes(big, REFERENCE)
    with_warmup = big + "warmup = LinearLR(optimizer, start_factor=0.1, total_iters=500)\n"
    assert (6, "LC305") not in _codes(with_warmup, REFERENCE)


def test_config_table_is_read(project: Path, run_cli) -> None:
    (project / "train.py").write_text(textwrap.dedent(LOOP.format(lr="0.025")))
    (project / "pyproject.toml").write_text(
        "[tool.loopcheck.lr-scaling]\nreference-batch-size = 256\nreference-lr = 0.1\n")
    code, out, _ = run_cli("check", "--select", "LC304", "--no-show-source", "train.py")
    assert code == 1 and "train.py:6:52: LC304 the learning rate 0.025 does not follow" in out
    (project / "pyproject.toml").write_text("[tool.loopcheck.lr-scaling]\nreference-batch-size = 0\n"
                                            "reference-lr = 0.1\n")
    code, _, err = run_cli("check", "train.py")
    assert code == 2 and "lr-scaling.reference-batch-size must be a positive integer" in err


WARMUP = """
learning_rate = 9e-3
micro_batch_size = 4
gradient_accumulation_iters = 16
warmup_iters = 2 * (epoch_size // micro_batch_size)
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
step_count = 0
for i, (x, y) in enumerate(loader):
    lr = {lr}
    for group in optimizer.param_groups:
        group["lr"] = lr
    loss = criterion(model(x), y) / gradient_accumulation_iters
    loss.backward()
    if (i + 1) % gradient_accumulation_iters == 0:
        optimizer.step()
        optimizer.zero_grad()
        step_count += 1
"""


def test_a_warmup_length_counted_in_batches_scales_nothing() -> None:
    # `epoch_size // micro_batch_size` is a number of batches: the ramp divides by it, no batch rule
    assert _codes(WARMUP.format(lr="learning_rate * step_count / warmup_iters"), Options()) == []
    assert _codes(WARMUP.format(lr="learning_rate * micro_batch_size / 256"), Options()) == [(9, "LC304")]


HELPER_SCALED = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

LEARNING_RATE = 0.001
MIN_BATCH_SIZE = 8


def scale_lr(batch_size, lr):
    return lr * (batch_size / {reference})


def run(local_rank, world_size, args):
    learning_rate = scale_lr(args.replica_batch_size * world_size, LEARNING_RATE)
    dist.init_process_group("gloo", rank=local_rank, world_size=world_size)
    model = DDP(torch.nn.Linear(16, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    for epoch in range(args.epochs):
        for x, y in args.data:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
"""


def test_a_helper_scaling_by_a_batch_its_caller_hands_against_a_fixed_reference() -> None:
    # Comet's DDP example: `MIN_BATCH_SIZE = 8`, a reference the file fixes, is no per-process batch;
    # the batch scaled by is the helper's parameter, handed the global batch by its caller
    assert _codes(HELPER_SCALED.format(reference="MIN_BATCH_SIZE"), Options()) == []
    assert _codes(HELPER_SCALED.format(reference="args.min_batch_size"), Options()) == [(11, "LC304")]
