"""LC604 on a loader built by a class or factory of another project module: yolov5's
``InfiniteDataLoader``, whose ``__iter__`` goes on with the one iterator ``__init__`` made, restarts
nothing when the loop takes ``next(iter(loader))``; a factory that returns a plain DataLoader, or a
subclass whose ``__iter__`` makes a new iterator, still does."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from loopcheck.project.loaders import resumes
from tests.projects import write_project

DATASETS = """
    import torch


    class InfiniteDataLoader(torch.utils.data.dataloader.DataLoader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            object.__setattr__(self, "batch_sampler", _RepeatSampler(self.batch_sampler))
            self.iterator = super().__iter__()

        def __iter__(self):
            for _ in range(len(self)):
                yield next(self.iterator)


    class FreshDataLoader(torch.utils.data.dataloader.DataLoader):
        def __iter__(self):
            self.iterator = super().__iter__()
            yield from self.iterator


    class _RepeatSampler:
        def __init__(self, sampler):
            self.sampler = sampler

        def __iter__(self):
            while True:
                yield from iter(self.sampler)


    def create_dataloader(path, image_weights=False):
        loader = torch.utils.data.DataLoader if image_weights else InfiniteDataLoader
        dataloader = loader(path, batch_size=16)
        return dataloader, path


    def create_plain_dataloader(path):
        return torch.utils.data.DataLoader(path, batch_size=16), path


    def create_fresh_dataloader(path):
        return FreshDataLoader(path, batch_size=16), path


    def create_pair(path):
        return InfiniteDataLoader(path, batch_size=16), torch.utils.data.DataLoader(path, batch_size=16)
"""

TRAIN = """
    import torch
    from utils.datasets import BUILDER


    class Trainer:
        def setup(self):
            TARGETS = BUILDER("target")

        def train(self, model, optimizer, train_loader, epochs):
            for epoch in range(epochs):
                for imgs in train_loader:
                    target_imgs = next(self.unlabeled_dataloader.__iter__())
                    loss = model(imgs, target_imgs)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
"""


def _codes(run_cli, *paths: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC604", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


@pytest.mark.parametrize(("builder", "targets", "flagged"), [
    ("create_dataloader", "self.unlabeled_dataloader, self.unlabeled_dataset", False),
    ("InfiniteDataLoader", "self.unlabeled_dataloader", False),
    ("create_plain_dataloader", "self.unlabeled_dataloader, self.unlabeled_dataset", True),
    ("create_fresh_dataloader", "self.unlabeled_dataloader, self.unlabeled_dataset", True),
    ("FreshDataLoader", "self.unlabeled_dataloader", True),
    ("create_pair", "self.unlabeled_dataloader, self.plain_loader", False),
    ("create_pair", "self.infinite_loader, self.unlabeled_dataloader", True),
])
def test_a_loader_of_another_module_restarts_only_where_its_iter_makes_a_new_iterator(
        project: Path, run_cli, builder: str, targets: str, flagged: bool) -> None:
    write_project(project, {"utils/__init__.py": "", "utils/datasets.py": DATASETS,
                            "train.py": TRAIN.replace("BUILDER", builder).replace("TARGETS", targets)})
    found = _codes(run_cli, "train.py")
    assert bool(found) is flagged, found
    assert all("LC604" in line for line in found)


@pytest.mark.parametrize(("iter_body", "resuming"), [
    ("for _ in range(len(self)):\n    yield next(self.iterator)", True),
    ("yield from self.iterator", True),
    ("return self.iterator", True),
    ("self.iterator = super().__iter__()\nyield from self.iterator", False),
    ("for batch in super().__iter__():\n    yield batch", False),
    ("return super().__iter__()", False),
    ("yield from self.other", False),
])
def test_only_an_iter_that_hands_on_an_iterator_made_in_init_resumes(iter_body: str, resuming: bool) -> None:
    body = textwrap.indent(iter_body, " " * 8)
    tree = ast.parse(f"class L(DataLoader):\n    def __init__(self, *a):\n        super().__init__(*a)\n"
                     f"        self.iterator = super().__iter__()\n    def __iter__(self):\n{body}\n")
    assert resumes(tree, "L") is resuming
