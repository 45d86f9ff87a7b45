"""LC304 reads Horovod's process count (``hvd.size()``) as the world size, in each import form."""

from __future__ import annotations

import textwrap

import pytest

from loopcheck.config import Options
from loopcheck.engine import check_text

LOOP = """
{imports}
sampler = torch.utils.data.distributed.DistributedSampler(dataset, num_replicas={size}, rank=0)
loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
lr = args.base_lr * args.batch_size / 256 * {size}
optimizer = torch.optim.SGD(model.parameters(), lr=lr)
for x, y in loader:
    optimizer.zero_grad()
    criterion(model(x), y).backward()
    optimizer.step()
"""


def _lc304(imports: str, size: str) -> list[int]:
    found = check_text(textwrap.dedent(LOOP.format(imports=imports, size=size)), "train.py",
                       frozenset({"LC304"}), Options())
    return [f.line for f in found]


@pytest.mark.parametrize(("imports", "size"), [
    ("import horovod.torch as hvd", "hvd.size()"),
    ("import horovod.torch", "horovod.torch.size()"),
    ("from horovod import torch as hvd", "hvd.size()"),
    ("from horovod.torch import size", "size()"),
])
def test_horovod_size_is_the_world_size(imports: str, size: str) -> None:
    assert _lc304(imports, size) == []


def test_processes_of_one_host_are_not_the_world_size() -> None:
    assert _lc304("import horovod.torch as hvd", "hvd.local_size()") == [5]


def test_a_size_of_something_else_is_not_the_world_size() -> None:
    assert _lc304("import horovod.torch as hvd\nimport mylib as hvd2", "hvd2.size()") == [6]
