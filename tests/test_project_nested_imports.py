"""Imports the project resolves beyond the importer's folder and the root: a project in a folder
of the checkout, run from there (EDM's ``edm/training/training_loop.py`` importing ``torch_utils``
of ``edm/``), and a name a package's ``__init__.py`` re-exports from a module of its own
(``from core.utils import Trainer`` with ``core/utils/__init__.py`` saying ``from .train import
Trainer``). What those modules define then counts as it does for a module imported directly, and a
change to them reaches the cached result."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.projects import write_project


def _codes(run_cli, *paths: str) -> list[str]:
    code, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


# EDM's torch_utils/misc.py (StyleGAN2-ADA, StyleGAN3 have the same helper)
SYNC_HELPER = """
    import contextlib

    import torch


    @contextlib.contextmanager
    def ddp_sync(module, sync):
        assert isinstance(module, torch.nn.Module)
        if sync or not isinstance(module, torch.nn.parallel.DistributedDataParallel):
            yield
        else:
            with module.no_sync():
                yield
"""

# EDM's training/training_loop.py, cut down to the accumulation rounds
EDM_LOOP = """
    import torch
    from torch_utils import misc


    def training_loop(net, loss_fn, dataset_iterator, device, num_accumulation_rounds=4):
        net.train().requires_grad_(True).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[device])
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        while True:
            optimizer.zero_grad(set_to_none=True)
            for round_idx in range(num_accumulation_rounds):
                with misc.ddp_sync(ddp, (round_idx == num_accumulation_rounds - 1)):
                    images, labels = next(dataset_iterator)
                    loss = loss_fn(net=ddp, images=images, labels=labels)
                    loss.sum().mul(1 / num_accumulation_rounds).backward()
            optimizer.step()
"""


def test_a_sync_helper_of_the_subproject_controls_the_sync(project: Path, run_cli) -> None:
    write_project(project, {"edm/torch_utils/__init__.py": "", "edm/torch_utils/misc.py": SYNC_HELPER,
                            "edm/training/__init__.py": "", "edm/training/training_loop.py": EDM_LOOP})
    assert _codes(run_cli, "edm/training/training_loop.py") == []


def test_a_helper_of_the_subproject_that_leaves_the_sync_alone_is_read_too(project: Path, run_cli) -> None:
    # the true twin: the same loop, whose helper of that name never enters no_sync()
    helper = textwrap.dedent(SYNC_HELPER).replace("with module.no_sync():", "with contextlib.nullcontext():")
    write_project(project, {"edm/torch_utils/__init__.py": "", "edm/torch_utils/misc.py": helper,
                            "edm/training/__init__.py": "", "edm/training/training_loop.py": EDM_LOOP})
    found = _codes(run_cli, "edm/training/training_loop.py")
    assert len(found) == 1 and " LC501 " in found[0]
    write_project(project, {"edm/torch_utils/misc.py": SYNC_HELPER})  # the cached result follows the helper
    assert _codes(run_cli, "edm/training/training_loop.py") == []


def test_the_root_comes_before_the_folders_between(project: Path, run_cli) -> None:
    # `torch_utils` of the root is the one imported where both exist
    helper = textwrap.dedent(SYNC_HELPER).replace("with module.no_sync():", "with contextlib.nullcontext():")
    write_project(project, {"torch_utils/__init__.py": "", "torch_utils/misc.py": helper,
                            "edm/torch_utils/__init__.py": "", "edm/torch_utils/misc.py": SYNC_HELPER,
                            "edm/training/training_loop.py": EDM_LOOP})
    found = _codes(run_cli, "edm/training/training_loop.py")
    assert len(found) == 1 and " LC501 " in found[0]


# adversarial_robustness_pytorch's core/utils/train.py, cut down
BASE = """
    import torch


    class Trainer:
        def __init__(self, model, lr=0.1):
            self.model = model
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
            self.criterion = torch.nn.CrossEntropyLoss()

        def standard_loss(self, x, y):
            self.optimizer.zero_grad()
            out = self.model(x)
            loss = self.criterion(out, y)
            return loss, {"loss": loss.item()}
"""

# its gowal21uncovering/utils/watrain.py, cut down: the subclass's loop never zeroes itself
WATRAIN = """
    import torch

    from core.utils import Trainer


    class WATrainer(Trainer):
        def train(self, dataloader, epoch=0):
            self.model.train()
            for x, y in dataloader:
                loss, batch_metrics = self.standard_loss(x, y)
                loss.backward()
                self.optimizer.step()
"""


def test_a_base_class_the_package_re_exports_zeroes(project: Path, run_cli) -> None:
    write_project(project, {"core/__init__.py": "", "core/utils/__init__.py": "from .train import Trainer\n",
                            "core/utils/train.py": BASE, "gowal21uncovering/utils/watrain.py": WATRAIN})
    assert _codes(run_cli, "gowal21uncovering/utils/watrain.py") == []


def test_a_re_exported_base_class_that_stops_zeroing_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"core/__init__.py": "", "core/utils/__init__.py": "from .train import Trainer, seed\n",
                            "core/utils/train.py": BASE, "gowal21uncovering/utils/watrain.py": WATRAIN})
    assert _codes(run_cli, "gowal21uncovering/utils/watrain.py") == []
    changed = textwrap.dedent(BASE).replace("self.optimizer.zero_grad()", "print('nothing to clear')")
    write_project(project, {"core/utils/train.py": changed})  # the true twin: the base class never zeroes
    found = _codes(run_cli, "gowal21uncovering/utils/watrain.py")
    assert len(found) == 1 and " LC103 " in found[0]


def test_a_name_re_exported_under_another_name_is_not_followed(project: Path, run_cli) -> None:
    init = "from .train import Trainer as Base\nclass Trainer:\n    pass\n"
    write_project(project, {"core/__init__.py": "", "core/utils/__init__.py": init,
                            "core/utils/train.py": BASE, "gowal21uncovering/utils/watrain.py": WATRAIN})
    found = _codes(run_cli, "gowal21uncovering/utils/watrain.py")
    assert len(found) == 1 and " LC103 " in found[0]


# Accelerate's own repository: the package re-exports the class its scripts use
ACCELERATOR = """
    class Accelerator:
        def __init__(self, gradient_accumulation_steps=1):
            self.gradient_accumulation_steps = gradient_accumulation_steps

        def backward(self, loss, **kwargs):
            loss = loss / self.gradient_accumulation_steps
            loss.backward(**kwargs)
"""

# its test_utils/scripts/external_deps/test_checkpointing.py, cut down: N above 1 only under DeepSpeed
CHECKPOINTING = """
    import torch

    from accelerate import Accelerator


    def training_function(model, train_dataloader, num_epochs=2):
        accelerator = Accelerator()
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        if accelerator.state.deepspeed_plugin is not None:
            gradient_accumulation_steps = accelerator.state.deepspeed_plugin.deepspeed_config[
                "gradient_accumulation_steps"
            ]
        else:
            gradient_accumulation_steps = 1
        for epoch in range(num_epochs):
            model.train()
            for step, batch in enumerate(train_dataloader):
                loss = model(**batch).loss / gradient_accumulation_steps
                accelerator.backward(loss)
                if (step + 1) % gradient_accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()
"""


def test_accelerates_own_re_exported_accelerator_keeps_its_meaning(project: Path, run_cli) -> None:
    write_project(project, {"src/accelerate/__init__.py": "from .accelerator import Accelerator\n",
                            "src/accelerate/accelerator.py": ACCELERATOR,
                            "src/accelerate/test_utils/scripts/test_checkpointing.py": CHECKPOINTING})
    assert _codes(run_cli, "src/accelerate/test_utils/scripts/test_checkpointing.py") == []


def test_a_bracketed_re_export_is_followed(project: Path, run_cli) -> None:
    init = "from .train import (\n    seed,\n    Trainer,\n)\n"
    write_project(project, {"core/__init__.py": "", "core/utils/__init__.py": init,
                            "core/utils/train.py": BASE, "gowal21uncovering/utils/watrain.py": WATRAIN})
    assert _codes(run_cli, "gowal21uncovering/utils/watrain.py") == []
