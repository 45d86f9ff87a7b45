"""Project-wide facts: a DDP wrap, a backward/step wrapper, a loss function or an eval callback in
another module of the project counts for the loop that uses it; the finding points at the loop
and names the other file; it works on a single changed file (pre-commit) and with the cache."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from loopcheck.project import for_file, forget
from loopcheck.project.facts import ModuleFacts, extract
from tests.projects import write_project

ACCUMULATING = """
    import torch
    from utils import smart_ddp


    def train(model, loader, accum_steps=4):
        model = smart_ddp(model)
        optimizer = torch.optim.AdamW(model.parameters())
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
                optimizer.step()
                optimizer.zero_grad()
"""

SMART_DDP = """
    from torch.nn.parallel import DistributedDataParallel as DDP


    def smart_ddp(model):
        return DDP(model, device_ids=[0])
"""


def _codes(run_cli, *paths: str) -> list[str]:
    code, out, _ = run_cli("check", "-q", "--no-show-source", *paths)
    return [line for line in out.splitlines() if ": LC" in line]


def test_ddp_helper_of_another_module_counts(project: Path, run_cli) -> None:
    write_project(project, {"train.py": ACCUMULATING, "utils.py": SMART_DDP})
    found = _codes(run_cli, "train.py")  # only the changed file, as pre-commit passes it
    assert len(found) == 1 and found[0].startswith("train.py:11:")
    assert " LC501 " in found[0] and "by utils.py:5" in found[0]


@pytest.mark.parametrize("wrap", [
    "DDP(module=model.to(f\"cuda:{rank}\"), device_ids=[rank])",  # the module by keyword
    "DDP(model.to(rank), device_ids=[rank])",
])
def test_ddp_helper_wrapping_its_argument_by_keyword_counts(project: Path, run_cli, wrap: str) -> None:
    helper = SMART_DDP.replace("def smart_ddp(model):", "def smart_ddp(model, rank=0):") \
        .replace("DDP(model, device_ids=[0])", wrap)
    write_project(project, {"train.py": ACCUMULATING, "utils.py": helper})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and " LC501 " in found[0] and "by utils.py:5" in found[0], found


def test_a_helper_wrapping_something_else_by_keyword_wraps_no_argument(project: Path, run_cli) -> None:
    helper = SMART_DDP.replace("DDP(model, device_ids=[0])", "DDP(module=torch.nn.Linear(2, 2), device_ids=[0])") \
        .replace("from torch", "import torch\n    from torch")
    write_project(project, {"train.py": ACCUMULATING, "utils.py": helper})
    assert _codes(run_cli, "train.py") == []


def test_without_the_wrap_nothing_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"train.py": ACCUMULATING, "utils.py": "def smart_ddp(model):\n    return model\n"})
    assert _codes(run_cli, "train.py") == []


def test_entry_script_that_wraps_and_calls_the_loop(project: Path, run_cli) -> None:
    engine = ACCUMULATING.replace("from utils import smart_ddp\n", "").replace("        model = smart_ddp(model)\n", "")
    main = """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        from engine import train

        model = DistributedDataParallel(torch.nn.Linear(4, 2))
        train(model, [])
    """
    write_project(project, {"engine.py": engine, "main.py": main})
    found = _codes(run_cli, "engine.py")
    assert len(found) == 1 and " LC501 " in found[0] and "by main.py:6" in found[0]


def test_entry_script_that_imports_the_loop_through_its_package(project: Path, run_cli) -> None:
    # ml-cvnets: `from engine import Trainer` of a package whose `__init__.py` re-exports it from
    # `engine/training_engine.py`, then `Trainer(model=model, ...)` with the DDP-wrapped model
    engine = ACCUMULATING.replace("from utils import smart_ddp\n", "").replace("        model = smart_ddp(model)\n", "")
    main = """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        from engine import train

        model = DistributedDataParallel(torch.nn.Linear(4, 2))
        train(model, [])
    """
    write_project(project, {"engine/training_engine.py": engine, "main.py": main,
                            "engine/__init__.py": "from engine.training_engine import train\n"})
    found = _codes(run_cli, "engine/training_engine.py")
    assert len(found) == 1 and " LC501 " in found[0] and "by main.py:6" in found[0]
    write_project(project, {"engine/__init__.py": "def train(model, loader):\n    pass\n"})
    assert _codes(run_cli, "engine/training_engine.py") == []


@pytest.mark.parametrize(("others", "found"), [(0, 1), (3, 1), (99, 1), (100, 0)])
def test_a_tree_of_many_projects_is_not_searched_for_entry_scripts(project: Path, run_cli, others: int,
                                                                   found: int) -> None:
    # a folder of checkouts or a home directory: reading every wrap in it would take minutes
    engine = ACCUMULATING.replace("from utils import smart_ddp\n", "").replace("        model = smart_ddp(model)\n", "")
    main = """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        from engine import train

        model = DistributedDataParallel(torch.nn.Linear(4, 2))
        train(model, [])
    """
    other = "from torch.nn.parallel import DistributedDataParallel as DDP\n\nwrapped = DDP(model)\n"
    write_project(project, {"engine.py": engine, "main.py": main, **{f"other{i}/run.py": other for i in range(others)}})
    codes = _codes(run_cli, "engine.py")
    assert len(codes) == found and all(" LC501 " in c and "by main.py:6" in c for c in codes)


@pytest.mark.parametrize(("walked", "found"), [(3, 1), (2, 0)])
def test_a_tree_past_the_walk_bound_is_not_searched_for_entry_scripts(project: Path, run_cli,
                                                                      monkeypatch: pytest.MonkeyPatch, walked: int,
                                                                      found: int) -> None:
    monkeypatch.setattr("loopcheck.project.index._MAX_WALKED", walked)
    engine = ACCUMULATING.replace("from utils import smart_ddp\n", "").replace("        model = smart_ddp(model)\n", "")
    main = """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        from engine import train

        model = DistributedDataParallel(torch.nn.Linear(4, 2))
        train(model, [])
    """
    write_project(project, {"engine.py": engine, "main.py": main, "notes.py": "x = 1\n"})  # three files
    codes = _codes(run_cli, "engine.py")
    assert len(codes) == found and all(" LC501 " in c and "by main.py:6" in c for c in codes)


@pytest.mark.parametrize(("directory", "found"), [("mae_st", 1), ("other_name", 0)])
def test_a_repository_that_imports_itself_as_the_package_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               run_cli, directory: str, found: int) -> None:
    # run from the directory above the checkout, whose name is the package's: only that name resolves
    engine = ACCUMULATING.replace("from utils import smart_ddp\n", "").replace("        model = smart_ddp(model)\n", "")
    main = """
        import torch
        from torch.nn.parallel import DistributedDataParallel
        from mae_st.engine import train

        model = DistributedDataParallel(torch.nn.Linear(4, 2))
        train(model, [])
    """
    root = tmp_path / directory
    root.mkdir()
    monkeypatch.chdir(root)
    write_project(root, {"engine.py": engine, "main.py": main})
    codes = _codes(run_cli, "engine.py")
    assert len(codes) == found and all(" LC501 " in c and "by main.py:6" in c for c in codes)
    if found:  # the entry script stops wrapping: the cached result is not reused
        write_project(root, {"main.py": main.replace("DistributedDataParallel(torch", "(torch")})
        assert _codes(run_cli, "engine.py") == []


TASK = """
    import torch


    class Task:
        def train_epoch(self, model, loader, optimizer, accum_steps=4):
            for i, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0 or i + 1 == len(loader):
                    optimizer.step()
                    optimizer.zero_grad()
"""

RUNNER = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    class Runner:
        def __init__(self, task, model):
            self.task, self._model, self._wrapped = task, model, None

        @property
        def model(self):
            if self._wrapped is None:
                self._wrapped = DDP(self._model, device_ids=[0])
            return self._wrapped

        def train(self, loader):
            optimizer = torch.optim.AdamW(self._model.parameters())
            return self.task.train_epoch(model=self.model, loader=loader, optimizer=optimizer)
"""


def test_a_runner_that_hands_its_ddp_wrapper_to_a_method_of_this_file(project: Path, run_cli) -> None:
    # the runner never imports the task (a registry builds it): the link is the method it calls with the wrapper
    write_project(project, {"tasks/base.py": TASK, "runners/runner.py": RUNNER})
    found = _codes(run_cli, "tasks/base.py")
    assert len(found) == 1 and found[0].startswith("tasks/base.py:9:")
    assert " LC501 " in found[0] and "by runners/runner.py:13" in found[0]


@pytest.mark.parametrize("change", [
    ("model=self.model", "model=self._model"),  # the unwrapped module is handed over
    ("self.task.train_epoch(", "self.train_epoch("),  # the runner's own method, not the task's
    ("def train_epoch(self, model,", "def train_epoch(self, net,"),  # no parameter takes the wrapper
])
def test_a_runner_call_that_hands_over_no_wrapper_wraps_nothing(project: Path, run_cli,
                                                                 change: tuple[str, str]) -> None:
    task, runner = TASK, RUNNER.replace(*change)
    if change[0].startswith("def "):
        task, runner = TASK.replace(*change).replace("model(x)", "net(x)"), RUNNER
    write_project(project, {"tasks/base.py": task, "runners/runner.py": runner})
    assert _codes(run_cli, "tasks/base.py") == []


def test_sync_helper_of_another_module_controls_the_sync(project: Path, run_cli) -> None:
    helper = SMART_DDP + textwrap.dedent("""

        import contextlib


        @contextlib.contextmanager
        def ddp_sync(module, sync):
            if sync:
                yield
            else:
                with module.no_sync():
                    yield
    """)
    loop = """
        import torch
        from utils import ddp_sync, smart_ddp


        def train(model, loader, accum_steps=4):
            model = smart_ddp(model)
            optimizer = torch.optim.AdamW(model.parameters())
            for i, (x, y) in enumerate(loader):
                last = (i + 1) % accum_steps == 0 or i + 1 == len(loader)
                with ddp_sync(model, last):
                    loss = torch.nn.functional.cross_entropy(model(x), y) / accum_steps
                    loss.backward()
                if last:
                    optimizer.step()
                    optimizer.zero_grad()
    """
    write_project(project, {"train.py": loop, "utils.py": helper})
    assert _codes(run_cli, "train.py") == []


MP_TRAINER = """
    class MixedPrecisionTrainer:
        def __init__(self, model, use_fp16=False):
            self.model = model
            self.use_fp16 = use_fp16
            self.lg_loss_scale = 20.0

        def zero_grad(self):
            for p in self.model.parameters():
                p.grad = None

        def backward(self, loss):
            if self.use_fp16:
                (loss * 2 ** self.lg_loss_scale).backward()
            else:
                loss.backward()

        def optimize(self, opt):
            return self._optimize_normal(opt)

        def _optimize_normal(self, opt):
            opt.step()
            return True
"""


def test_backward_and_step_wrappers_of_another_module(project: Path, run_cli) -> None:
    loop = """
        import torch
        from fp16_util import MixedPrecisionTrainer


        class TrainLoop:
            def __init__(self, model, data, microbatches=4):
                self.mp_trainer = MixedPrecisionTrainer(model)
                self.opt = torch.optim.AdamW(model.parameters())
                self.model, self.data, self.microbatches = model, data, microbatches

            def run_loop(self, steps):
                for step in range(steps):
                    self.mp_trainer.zero_grad()
                    for micro in range(self.microbatches):
                        x, y = next(self.data)
                        loss = torch.nn.functional.mse_loss(self.model(x), y)
                        self.mp_trainer.backward(loss)
                    self.mp_trainer.optimize(self.opt)
    """
    write_project(project, {"train_util.py": loop, "fp16_util.py": MP_TRAINER})
    found = _codes(run_cli, "train_util.py")
    assert len(found) == 1 and found[0].startswith("train_util.py:18:") and " LC102 " in found[0]
    divided = loop.replace("mse_loss(self.model(x), y)", "mse_loss(self.model(x), y) / self.microbatches")
    write_project(project, {"train_util.py": divided})
    assert _codes(run_cli, "train_util.py") == []


def test_eval_callback_of_another_module(project: Path, run_cli) -> None:
    helpers = """
        import torch


        def evaluate(net, loader):
            net.eval()
            with torch.no_grad():
                return sum(float((net(x).argmax(1) == y).sum()) for x, y in loader)
    """
    loop = """
        import torch
        from helpers import evaluate


        def fit(model, train_loader, val_loader, epochs=10):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.train()
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    optimizer.step()
                evaluate(model, val_loader)
    """
    write_project(project, {"train.py": loop, "helpers.py": helpers})
    found = _codes(run_cli, "--extend-select", "LC605", "train.py")  # opt-in in check
    assert len(found) == 1 and found[0].startswith("train.py:14:") and " LC605 " in found[0]
    assert "helpers.py:5" in found[0]
    restored = helpers.replace("                return sum(", "                acc = sum(") + "    net.train()\n    return acc\n"
    write_project(project, {"helpers.py": restored})
    assert _codes(run_cli, "--extend-select", "LC605", "train.py") == []


@pytest.mark.parametrize(("call", "flagged"), [
    ("evaluate(model, val_loader, is_training=True)", False),  # the caller skips the switch
    ("evaluate(model, val_loader, True)", False),
    ("evaluate(model, val_loader, is_training=False)", True),
    ("evaluate(model, val_loader)", True),  # the default is not read: the switch may run
    ("evaluate(model, val_loader, is_training=args.train)", True),
])
def test_eval_callback_of_another_module_skipped_by_a_parameter(project: Path, run_cli, call: str,
                                                                flagged: bool) -> None:
    helpers = """
        import torch


        def evaluate(net, loader, is_training=False):
            if not is_training:
                net.eval()
            with torch.no_grad():
                return sum(float((net(x).argmax(1) == y).sum()) for x, y in loader)
    """
    loop = f"""
        import torch
        from helpers import evaluate


        def fit(args, model, train_loader, val_loader, epochs=10):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.train()
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    optimizer.step()
                {call}
    """
    write_project(project, {"train.py": loop, "helpers.py": helpers})
    found = _codes(run_cli, "--extend-select", "LC605", "train.py")
    assert [" LC605 " in f for f in found] == ([True] if flagged else [])


def test_eval_mid_epoch_by_another_module_restored_by_the_step_method(project: Path, run_cli) -> None:
    # joeynmt's shape: validation every N updates (mid-epoch) through a function of another module that
    # leaves the model in eval mode; the per-batch step method switches training back on
    prediction = """
        import torch


        def validate_on_data(model, loader):
            model.eval()
            with torch.no_grad():
                return sum(float(model(x).sum()) for x, _ in loader)
    """
    training = """
        import torch
        from prediction import validate_on_data


        class TrainManager:
            def __init__(self, model, validation_freq=100):
                self.model = model
                self.optimizer = torch.optim.Adam(model.parameters())
                self.validation_freq = validation_freq
                self.steps = 0

            def train_and_validate(self, train_loader, valid_loader, epochs):
                for epoch in range(epochs):
                    self.model.train()
                    for x, y in train_loader:
                        self._train_step(x, y)
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        self.steps += 1
                        if self.steps % self.validation_freq == 0:
                            validate_on_data(self.model, valid_loader)

            def _train_step(self, x, y):
                self.model.train()
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
                loss.backward()
    """
    write_project(project, {"training.py": training, "prediction.py": prediction})
    assert _codes(run_cli, "--extend-select", "LC605", "training.py") == []
    # without the step method's train(), the rest of the epoch trains in eval mode
    write_project(project, {"training.py": training.replace("                self.model.train()\n                loss", "                loss")})
    found = _codes(run_cli, "--extend-select", "LC605", "training.py")
    assert len(found) == 1 and found[0].startswith("training.py:22:") and "prediction.py:5" in found[0]


def test_eval_undone_by_the_epoch_function_of_another_module(project: Path, run_cli) -> None:
    # LSGM's shape: each epoch trains through a function of another module that starts with
    # `dae.train()`; the evaluation after it (another module too) leaves the model in eval mode
    objective = """
        import torch


        def train_epoch(loader, dae, optimizer, scaler):
            dae.train()
            for x in loader:
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(dae(x), x)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            return 0.0
    """
    evaluation = """
        import torch


        def evaluation(loader, dae):
            dae.eval()
            with torch.no_grad():
                return sum(float(dae(x).sum()) for x in loader)
    """
    # (the entry script mentions `backward()` only in an option's help, as LSGM's does: enough for the
    # screen that skips files without a training loop)
    loop = """
        import argparse
        import torch
        from objective import train_epoch
        from evaluation import evaluation

        parser = argparse.ArgumentParser()
        parser.add_argument("--grad_mode", help="use backward() instead of grad()")


        def main(dae, loader, val_loader, epochs=10):
            optimizer = torch.optim.Adam(dae.parameters())
            scaler = torch.amp.GradScaler("cuda")
            for epoch in range(epochs):
                train_epoch(loader, dae, optimizer, scaler)
                if (epoch + 1) % 5 == 0:
                    evaluation(val_loader, dae)
    """
    write_project(project, {"train.py": loop, "objective.py": objective, "evaluation.py": evaluation})
    assert _codes(run_cli, "--extend-select", "LC605", "train.py") == []
    # an epoch function that switches the mode on only after its updates does not undo the leak
    late = objective.replace("            dae.train()\n", "").replace("            return 0.0", "            dae.train()\n            return 0.0")
    assert late != objective
    write_project(project, {"objective.py": late})
    found = _codes(run_cli, "--extend-select", "LC605", "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:17:") and " LC605 " in found[0]
    # without it the rest of the run trains in eval mode
    write_project(project, {"objective.py": objective.replace("            dae.train()\n", "")})
    found = _codes(run_cli, "--extend-select", "LC605", "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:17:") and "evaluation.py:5" in found[0]


def test_eval_mode_of_a_model_class_of_another_module(project: Path, run_cli) -> None:
    models = """
        from torch import nn


        class Cell(nn.Module):
            def __init__(self, n_inp, n_hid):
                super().__init__()
                self.i2h = nn.Linear(n_inp + n_hid, n_hid)

            def forward(self, x, h):
                return self.i2h(torch.cat((x, h), 1)).tanh()
    """
    loop = """
        import torch
        import models


        def fit(loader, test_batch, steps=1000):
            model = models.Cell(2, 64).to("cpu")
            optimizer = torch.optim.Adam(model.parameters())
            model.train()
            for i, (x, h, y) in enumerate(loader):
                optimizer.zero_grad()
                torch.nn.functional.mse_loss(model(x, h), y).backward()
                optimizer.step()
                if i % 100 == 0:
                    model.eval()
                    with torch.no_grad():
                        print(model(*test_batch).mean())
    """
    write_project(project, {"train.py": loop, "models.py": models})
    assert _codes(run_cli, "--extend-select", "LC605", "train.py") == []  # Linear only: eval mode changes nothing
    dropout = models.replace("self.i2h = nn.Linear(n_inp + n_hid, n_hid)",
                             "self.i2h = nn.Sequential(nn.Linear(n_inp + n_hid, n_hid), nn.Dropout(0.1))")
    write_project(project, {"models.py": dropout})
    found = _codes(run_cli, "--extend-select", "LC605", "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:15:") and " LC605 " in found[0]


def test_eval_mode_of_a_model_built_from_blocks_of_a_sibling_module(project: Path, run_cli) -> None:
    # UnivNet's layout: the generator's module imports its blocks from a sibling module; every
    # dropout keeps the rate 0 its constructors default to, and the convolutions are weight-normalised
    lvcnet = """
        from torch import nn


        class KernelPredictor(nn.Module):
            def __init__(self, channels, kpnet_dropout=0.0):
                super().__init__()
                self.convs = nn.Sequential(nn.Dropout(kpnet_dropout),
                                           nn.utils.weight_norm(nn.Conv1d(channels, channels, 3)))

            def forward(self, c):
                return self.convs(c)


        class LVCBlock(nn.Module):
            def __init__(self, channels, kpnet_dropout=0.0):
                super().__init__()
                self.kernel_predictor = KernelPredictor(channels, kpnet_dropout=kpnet_dropout)

            def forward(self, x):
                return x + self.kernel_predictor(x)
    """
    generator = """
        from torch import nn

        from .lvcnet import LVCBlock


        class Generator(nn.Module):
            def __init__(self, channels):
                super().__init__()
                self.blocks = nn.ModuleList([LVCBlock(channels) for _ in range(3)])

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x
    """
    loop = """
        import torch
        from model.generator import Generator


        def fit(loader, test_batch):
            model_g = Generator(16).to("cpu")
            optimizer = torch.optim.Adam(model_g.parameters())
            model_g.train()
            for i, (x, y) in enumerate(loader):
                optimizer.zero_grad()
                torch.nn.functional.l1_loss(model_g(x), y).backward()
                optimizer.step()
                if i % 100 == 0:
                    model_g.eval()
                    with torch.no_grad():
                        print(model_g(test_batch).mean())
    """
    write_project(project, {"train.py": loop, "model/__init__.py": "", "model/generator.py": generator,
                            "model/lvcnet.py": lvcnet})
    assert _codes(run_cli, "--extend-select", "LC605", "train.py") == []
    write_project(project, {"model/generator.py": generator.replace("LVCBlock(channels)", "LVCBlock(channels, 0.1)")})
    found = _codes(run_cli, "--extend-select", "LC605", "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:15:") and " LC605 " in found[0]


def test_eval_of_a_copy_in_another_module(project: Path, run_cli) -> None:
    attack = """
        import copy


        def perturb(model, x):
            model = copy.deepcopy(model)
            model.eval()
            x = x.clone().requires_grad_(True)
            model(x).norm().backward()
            return (x + x.grad.sign() / 16).detach()
    """
    loop = """
        import torch
        from attack import perturb


        def fit(model, loader, epochs=10):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(epochs):
                model.train()
                for x, y in loader:
                    adv = perturb(model, x)
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(adv), y).backward()
                    optimizer.step()
    """
    write_project(project, {"train.py": loop, "attack.py": attack})
    assert _codes(run_cli, "--extend-select", "LC605", "train.py") == []
    write_project(project, {"attack.py": attack.replace("model = copy.deepcopy(model)", "pass")})
    found = _codes(run_cli, "--extend-select", "LC605", "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:11:") and "attack.py:5" in found[0]


def test_loss_function_of_another_module_keeps_the_graph(project: Path, run_cli) -> None:
    losses = """
        import torch.nn.functional as F


        def compute_loss(model, x, y):
            logits = model(x)
            return F.cross_entropy(logits, y)
    """
    loop = """
        import torch
        from losses import compute_loss


        def fit(model, loader):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            history = []
            for x, y in loader:
                optimizer.zero_grad()
                compute_loss(model, x, y).backward()
                optimizer.step()
                history.append(compute_loss(model, x, y))
    """
    write_project(project, {"train.py": loop, "losses.py": losses})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and " LC601 " in found[0]


LOSS_CLASS = """
    import torch.nn.functional as F


    class DualLoss:
        def __init__(self, weight):
            self.weight = weight

        def __call__(self, out, y):
            parts = {"l1": F.l1_loss(out, y), "mse": self.weight * F.mse_loss(out, y)}
            loss_sum = sum(list(parts.values())) / len(parts)
            return loss_sum, parts


    def create_loss(weight):
        loss_fn = DualLoss(weight)
        return loss_fn
"""

LOSS_DICT_LOOP = """
    import torch
    from collections import defaultdict
    from losses import create_loss


    class Trainer:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            self.loss_fn = create_loss(0.5)
            self.scaler = torch.amp.GradScaler()

        def train_one_batch(self, x, y):
            self.optimizer.zero_grad()
            loss, parts = self.loss_fn(self.model(x), y)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return parts

        def train_one_epoch(self, loader):
            totals = defaultdict(float)
            for x, y in loader:
                parts = self.train_one_batch(x, y)
                for name, value in parts.items():
                    totals[name] += value
            return totals
"""


@pytest.mark.parametrize("loop", [
    LOSS_DICT_LOOP,
    LOSS_DICT_LOOP.replace("from losses import create_loss", "from losses import DualLoss").replace(
        "create_loss(0.5)", "DualLoss(0.5)"),
])
def test_a_loss_class_of_another_module_whose_dict_the_backpropagated_sum_is_built_from(
        project: Path, run_cli, loop: str) -> None:
    write_project(project, {"train.py": loop, "losses.py": LOSS_CLASS})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:27:") and " LC601 " in found[0]
    assert "(returned by losses.py:9)" in found[0]


@pytest.mark.parametrize("returned", [
    "return loss_sum, {k: v.detach() for k, v in parts.items()}",  # detached copies
    "return self.weight * loss_sum, parts",  # the back-propagated element reads more than the dict
])
def test_a_loss_class_of_another_module_returning_no_graph_in_its_dict(project: Path, run_cli, returned: str) -> None:
    write_project(project, {"train.py": LOSS_DICT_LOOP, "losses.py": LOSS_CLASS.replace("return loss_sum, parts", returned)})
    assert _codes(run_cli, "train.py") == []


def test_a_loss_dict_kept_only_where_the_sum_is_back_propagated(project: Path, run_cli) -> None:
    # the sum is never back-propagated here: nothing says the dict holds a graph
    loop = LOSS_DICT_LOOP.replace("self.scaler.scale(loss).backward()", "self.scaler.scale(other).backward()")
    write_project(project, {"train.py": loop, "losses.py": LOSS_CLASS})
    assert _codes(run_cli, "train.py") == []


def test_a_loss_class_that_starts_detaching_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"train.py": LOSS_DICT_LOOP, "losses.py": LOSS_CLASS})
    assert len(_codes(run_cli, "train.py")) == 1
    detached = LOSS_CLASS.replace("return loss_sum, parts", "return loss_sum, {k: v.item() for k, v in parts.items()}")
    write_project(project, {"losses.py": detached})
    assert _codes(run_cli, "train.py") == []


MEASURES = """
    def alignment_score(alignments):
        return alignments.max(dim=1)[0].mean(dim=1).mean(dim=0)
"""

AVERAGES = """
    class KeepAverage:
        def __init__(self):
            self.values, self.iters = {}, {}

        def update_value(self, name, value):
            self.values[name] = self.values.get(name, 0) * self.iters.get(name, 0) + value
            self.iters[name] = self.iters.get(name, 0) + 1
            self.values[name] /= self.iters[name]
"""

KEEPING_LOOP = """
    from measures import alignment_score
    from averages import KeepAverage


    def train(model, loader, optimizer, criterion):
        keep_avg = KeepAverage()
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            out, alignments = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            score = alignment_score(alignments)
            keep_avg.update_value("score", score)
"""


def test_a_graph_kept_by_a_method_of_another_module(project: Path, run_cli) -> None:
    write_project(project, {"train.py": KEEPING_LOOP, "measures.py": MEASURES, "averages.py": AVERAGES})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:16:") and " LC601 " in found[0]
    assert "(returned by measures.py:2)" in found[0] and "(kept by averages.py:6)" in found[0]


@pytest.mark.parametrize(("module", "old", "new"), [
    ("measures.py", ".mean(dim=0)", ".mean(dim=0).item()"),  # a number comes back
    ("measures.py", "[0].mean(dim=1)", "[1].float().mean(dim=1)"),  # the indices: no graph
    ("averages.py", "+ value", "+ float(value)"),  # the method keeps a number
    ("averages.py", "self.values[name] = self.values.get(name, 0) * self.iters.get(name, 0) + value",
     "print(name, value)"),  # the method does not keep its argument
])
def test_no_graph_kept_through_other_modules(project: Path, run_cli, module: str, old: str, new: str) -> None:
    files = {"train.py": KEEPING_LOOP, "measures.py": MEASURES, "averages.py": AVERAGES}
    assert old in files[module]
    files[module] = files[module].replace(old, new)
    write_project(project, files)
    assert _codes(run_cli, "train.py") == []


def test_a_function_that_starts_detaching_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"train.py": KEEPING_LOOP, "measures.py": MEASURES, "averages.py": AVERAGES})
    assert len(_codes(run_cli, "train.py")) == 1
    write_project(project, {"measures.py": MEASURES.replace(".mean(dim=0)", ".mean(dim=0).item()")})
    assert _codes(run_cli, "train.py") == []


def test_a_changed_fact_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"train.py": ACCUMULATING, "utils.py": SMART_DDP})
    assert len(_codes(run_cli, "train.py")) == 1
    write_project(project, {"utils.py": "def smart_ddp(model):\n    return model  # single process now\n"})
    assert _codes(run_cli, "train.py") == []
    write_project(project, {"utils.py": SMART_DDP})
    assert len(_codes(run_cli, "train.py")) == 1


def test_a_runner_that_stops_handing_over_its_wrapper_invalidates_the_cached_result(project: Path,
                                                                                     run_cli) -> None:
    write_project(project, {"tasks/base.py": TASK, "runners/runner.py": RUNNER})
    assert len(_codes(run_cli, "tasks/base.py")) == 1
    write_project(project, {"runners/runner.py": RUNNER.replace("model=self.model", "model=self._model")})
    assert _codes(run_cli, "tasks/base.py") == []
    write_project(project, {"runners/runner.py": RUNNER})
    assert len(_codes(run_cli, "tasks/base.py")) == 1


def test_a_warm_run_starts_no_worker_and_rechecks_only_what_changed(project: Path, run_cli,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import loopcheck.project.index as index_module
    from loopcheck import workers
    from tests.conftest import BUGGY

    write_project(project, {"train.py": ACCUMULATING, "utils.py": SMART_DDP, "other.py": BUGGY})
    first = _codes(run_cli, ".")
    assert [line.split(":")[0] for line in first] == ["other.py", "train.py"]
    started: list[bool] = []
    start = workers.Pool._start
    monkeypatch.setattr(workers.Pool, "_start", lambda pool: started.append(True) or start(pool))  # one entry per worker
    reader = index_module.ModuleReader

    def parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a module parsed again: the facts the workers read were not saved")

    monkeypatch.setattr(index_module, "ModuleReader", parse)
    assert _codes(run_cli, ".") == first and started == []
    monkeypatch.setattr(index_module, "ModuleReader", reader)
    write_project(project, {"utils.py": "def smart_ddp(model):\n    return model  # single process now\n"})
    assert _codes(run_cli, ".") == first[:1] and started == [True]  # train.py checked again, in one worker
    (project / "train.py").write_text((project / "train.py").read_text() + "# edited\n")
    assert _codes(run_cli, ".") == first[:1] and started == [True, True]


def test_a_warm_run_parses_no_module_that_was_read_by_name_only(project: Path, run_cli,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import loopcheck.project.index as index_module

    losses = """
        import torch.nn.functional as F


        def compute_loss(model, x, y):
            return F.cross_entropy(model(x), y)
    """
    loop = ACCUMULATING.replace("from utils import smart_ddp", "from utils import smart_ddp\n    from losses import compute_loss")
    loop = loop.replace("torch.nn.functional.cross_entropy(model(x), y)", "compute_loss(model, x, y)")
    write_project(project, {"train.py": loop, "utils.py": SMART_DDP, "losses.py": losses})
    first = _codes(run_cli, ".")
    assert len(first) == 1 and " LC501 " in first[0]

    def parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a module without a DDP wrap parsed again for the warm run's DDP scan")

    monkeypatch.setattr(index_module, "ModuleReader", parse)
    assert _codes(run_cli, ".") == first


def test_a_lookup_reads_only_the_functions_and_methods_it_names(tmp_path: Path) -> None:
    from loopcheck.project.index import ProjectIndex

    write_project(tmp_path, {"fp16_util.py": MP_TRAINER + "\n\n    def step_all(opt):\n        opt.step()\n"})
    path = tmp_path / "fp16_util.py"
    whole = extract(path.read_text(), "fp16_util.py")
    index = ProjectIndex(tmp_path.resolve(), None)
    one = index.facts(path, names=["MixedPrecisionTrainer.optimize"])
    assert one is not None and not one.complete and one.functions == {}
    assert one.classes == {"MixedPrecisionTrainer": {"optimize": whole.classes["MixedPrecisionTrainer"]["optimize"]}}
    two = index.facts(path, names=["step_all", "MixedPrecisionTrainer.__init__"])  # __init__: no effect
    assert two is not None and two.functions == whole.functions and two.classes == one.classes
    assert index.facts(path, names=["step_all"]) is two  # known: not read again
    full = index.facts(path)
    assert full is not None and full.complete and (full.functions, full.classes) == (whole.functions, whole.classes)


def test_facts_of_a_module() -> None:
    facts = extract(textwrap.dedent(MP_TRAINER), "fp16_util.py").classes["MixedPrecisionTrainer"]
    assert facts["backward"].backward == 0 and facts["optimize"].steps == (0,) and facts["zero_grad"].zeroes
    assert "__init__" not in facts and facts["backward"].line == 12  # no effect: not read


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.py", ".git"])
def test_the_root_is_found_from_a_nested_file(tmp_path: Path, marker: str) -> None:
    (tmp_path / marker).mkdir() if marker == ".git" else (tmp_path / marker).write_text("")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "train.py").write_text("from pkg.utils import smart_ddp\n")
    (tmp_path / "pkg" / "utils.py").write_text(textwrap.dedent(SMART_DDP))
    found = for_file(tmp_path / "pkg" / "sub" / "train.py")
    assert found is not None and found.index.root == tmp_path.resolve()
    assert found._function("smart_ddp") is not None and found._function("smart_ddp").facts.wraps_ddp


def test_imported_modules_are_parsed_only_for_names_they_can_define(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import loopcheck.project.index as index_module

    parsed: list[str] = []
    real = index_module.ModuleReader.read
    monkeypatch.setattr(index_module.ModuleReader, "read", lambda reader, facts, names:
                        parsed.append(reader.path) or real(reader, facts, names))
    write_project(tmp_path, {"train.py": ACCUMULATING + "\n        log(loss)\n", "utils.py": SMART_DDP,
                      "logs.py": "def log(value):\n    print(value)\n"})
    source = (tmp_path / "train.py").read_text().replace("from utils import smart_ddp",
                                                         "from utils import smart_ddp\nfrom logs import log")
    (tmp_path / "train.py").write_text(source)
    found = for_file(tmp_path / "train.py")
    assert found is not None
    assert found._function("smart_ddp") is not None and found._function("smart_ddp").facts.wraps_ddp
    assert found._function("log") is None  # logs.py defines log, but it has no fact: read, then empty
    assert found._function("missing") is None and parsed == ["utils.py", "logs.py"]
    (tmp_path / "logs.py").write_text("from other import log\n")  # re-exported: no `def log` to read
    forget()  # a new run
    found = for_file(tmp_path / "train.py")
    parsed.clear()
    assert found is not None and found._function("log") is None and parsed == []


def test_a_selective_gradient_clearing_is_no_zeroing() -> None:
    helpers = """
        def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
            if epoch >= freeze_last_layer:
                return
            for n, p in model.named_parameters():
                if "last_layer" in n:
                    p.grad = None


        def zero_grad(params):
            for p in params:
                if p.grad is not None:
                    p.grad.detach_()
                    p.grad.zero_()


        def clear(model):
            for p in model.parameters():
                if p.requires_grad:
                    p.grad = None


        def detect_grad_nan(model):
            for param in model.parameters():
                if (param.grad != param.grad).float().sum() != 0:  # nan detected
                    param.grad.zero_()


        def clear_trainable(model):
            for p in model.parameters():
                if p.grad is not None and not (not p.requires_grad):
                    p.grad.zero_()
    """
    facts = extract(textwrap.dedent(helpers), "utils.py").functions
    assert not facts["cancel_gradients_last_layer"].zeroes  # freezes one layer (DINO)
    assert not facts["detect_grad_nan"].zeroes  # only a gradient holding NaN (DeepEMD)
    assert facts["zero_grad"].zeroes and facts["clear"].zeroes and facts["clear_trainable"].zeroes


def test_a_module_clearing_its_own_sub_module_gradients_is_no_zeroing() -> None:
    classes = """
        import torch.nn as nn


        class ProjectionHead(nn.Module):
            def cancel_last_layer_gradients(self, current_epoch):
                if current_epoch >= self.freeze_last_layer:
                    return
                for param in self.last_layer.parameters():
                    param.grad = None

            def forward(self, x):
                return self.last_layer(self.layers(x))


        class Trainer:
            def clear(self):
                for param in self.model.parameters():
                    param.grad = None
    """
    facts = extract(textwrap.dedent(classes), "heads.py").classes
    assert not facts["ProjectionHead"]["cancel_last_layer_gradients"].zeroes  # freezes its last layer (lightly's DINO head)
    assert facts["Trainer"]["clear"].zeroes  # a trainer's model is the whole model


AMP_UTIL = """
    import torch


    class Updater:
        def __init__(self, model):
            self.model = model
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(self, *, grad_scaler=None):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            if grad_scaler is not None:
                grad_scaler.step(self.optimizer)
                grad_scaler.update()
            else:
                self.optimizer.step()


    class Trainer:
        def __init__(self):
            self.scaler = torch.amp.GradScaler("cuda")

        def optimize(self, opt):
            self.scaler.step(opt)
            self.scaler.update()

        def step_only(self, opt):
            self.scaler.step(opt)


    def step_through(scaler, optimizer):
        scaler.step(optimizer)
        scaler.update()


    def step_direct(optimizer):
        optimizer.step()
"""


def test_a_step_through_a_scaler_of_another_module_steps_the_optimizer_not_the_scaler(project: Path,
                                                                                      run_cli) -> None:
    import json

    from loopcheck.project.facts import ModuleFacts

    facts = extract(textwrap.dedent(AMP_UTIL), "amp_util.py")
    assert facts.classes["Updater"]["step"].steps == () and facts.classes["Updater"]["step"].scaler_steps == ()
    assert facts.classes["Trainer"]["optimize"].scaler_steps == (("self.scaler", 0, True),)
    assert facts.classes["Trainer"]["step_only"].scaler_steps == (("self.scaler", 0, False),)
    through = facts.functions["step_through"]
    assert through.steps == () and through.scaler_steps == ((0, 1, True),)  # the optimizer, through the scaler
    assert facts.functions["step_direct"].steps == (0,)
    assert ModuleFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts  # as cached
    loop = """
        import torch
        from amp_util import Trainer, Updater, step_direct, step_through


        def train(model, loader):
            scaler = torch.amp.GradScaler("cuda")
            updater, trainer = Updater(model), Trainer()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                optimizer.zero_grad()
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                scaler.scale(loss).backward()
                STEP
    """
    write_project(project, {"amp_util.py": AMP_UTIL})
    for through in ["updater.step(grad_scaler=scaler)", "step_through(scaler, optimizer)"]:
        write_project(project, {"train.py": loop.replace("STEP", through)})
        assert _codes(run_cli, "train.py") == [], through
    for through in ["trainer.optimize(optimizer)", "trainer.step_only(optimizer)"]:  # the wrapper's own scaler
        write_project(project, {"train.py": loop.replace("STEP", through).replace("scaler.scale(", "trainer.scaler.scale(")})
        assert _codes(run_cli, "train.py") == [], through
    write_project(project, {"train.py": loop.replace("STEP", "step_direct(optimizer)")})
    found = _codes(run_cli, "train.py")  # the helper bypasses the scaler for real
    assert len(found) == 1 and found[0].startswith("train.py:15:") and " LC203 " in found[0]
    assert "`optimizer.step()` (in amp_util.py:36)" in found[0] and "[*]" not in found[0]  # no rewrite of the call


BLOCKS = '''
import torch


class Trainer:
    """A trainer.

Text at column 0 inside a docstring does not end the class.
"""

    def optimize(self, opt):
        self._step(opt)

    def _step(self, opt):
        opt.step()


def train_step(model, loss):
    helper(loss)


def helper(loss):
    loss.backward()


def log(value):
    print(value)
'''


def test_a_lookup_parses_only_the_blocks_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast

    from loopcheck.project.facts import ModuleFacts, ModuleReader

    parsed: list[str] = []
    real = ast.parse
    monkeypatch.setattr(ast, "parse", lambda text, *a, **k: parsed.append(text.strip().split("\n")[0]) or real(text, *a, **k))
    whole = extract(BLOCKS, "m.py")
    parsed.clear()
    reader = ModuleReader(BLOCKS, "m.py")
    nothing = ModuleFacts("m.py", complete=False, outlined=False)
    one = reader.read(nothing, ["train_step"])
    assert one.functions == {"train_step": whole.functions["train_step"]} and one.functions["train_step"].backward == 1
    assert parsed == ["def train_step(model, loss):", "def helper(loss):"]  # and the function it calls
    two = reader.read(nothing, ["Trainer.optimize", "log"])  # log has no effect: left out
    assert two.classes == {"Trainer": {"optimize": whole.classes["Trainer"]["optimize"]}} and two.functions == {}
    assert two.classes["Trainer"]["optimize"].steps == (0,) and two.classes["Trainer"]["optimize"].line == 11
    three = reader.read(nothing, ["*._step"])  # the method of any class
    assert three.classes == {"Trainer": {"_step": whole.classes["Trainer"]["_step"]}}
    # the class block grew past the two lines at column 0 in its docstring; each block parsed once
    assert parsed == ["def train_step(model, loss):", "def helper(loss):", *3 * ["class Trainer:"], "def log(value):"]


@pytest.mark.parametrize("source", [
    'x = """\ndef train_step(model, loss):\n    loss.backward()\n"""\n',  # a definition inside a string
    "def train_step(model, loss):\n    pass\n\n\ndef train_step(model, loss):\n    loss.backward()\n",  # twice
])
def test_a_module_whose_text_cannot_be_cut_is_read_whole(source: str) -> None:
    from loopcheck.project.facts import ModuleFacts, ModuleReader

    reader = ModuleReader(source, "m.py")
    found = reader.read(ModuleFacts("m.py", complete=False, outlined=False), ["train_step"])
    assert reader._parsed and found.functions == extract(source, "m.py").functions


def test_a_module_read_by_name_gets_its_imports_when_checked_itself(tmp_path: Path) -> None:
    from loopcheck.project.index import ProjectIndex

    write_project(tmp_path, {"helpers.py": "from utils import smart_ddp\n" + BLOCKS})
    path = tmp_path / "helpers.py"
    index = ProjectIndex(tmp_path.resolve(), None)
    some = index.facts(path, names=["train_step"])
    assert some is not None and not some.outlined and some.imports == {}
    own = index.facts(path, functions=False)
    assert own is not None and own.outlined and own.imports["smart_ddp"] == ("utils", "smart_ddp", 0)
    assert own.functions == some.functions  # what was read is kept
    index.entries = {k: [*v[:2], ModuleFacts.from_json(v[2]).to_json()] for k, v in index.entries.items()}
    assert index.facts(path, functions=False) == own  # through the cache's JSON


def test_the_project_is_scanned_for_ddp_wraps_only_when_they_are_asked_for(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from loopcheck.project.index import ProjectIndex

    engine = ACCUMULATING.replace("from utils import smart_ddp\n", "").replace("        model = smart_ddp(model)\n", "")
    main = "from torch.nn.parallel import DistributedDataParallel\nfrom engine import train\n\n" \
           "model = DistributedDataParallel(net)\ntrain(model, [])\n"
    write_project(tmp_path, {"engine.py": engine, "main.py": main, "data.py": "def load():\n    return []\n"})
    scans: list[Path] = []
    real = ProjectIndex._python_files
    monkeypatch.setattr(ProjectIndex, "_python_files", lambda index: scans.append(index.root) or real(index))
    forget()
    found = for_file(tmp_path / "engine.py")
    assert found is not None and scans == []  # the imports' facts need no scan
    assert found.ddp_importers == ["main.py:4"] and found.ddp_importers == ["main.py:4"] and len(scans) == 1
    other = for_file(tmp_path / "data.py")
    assert other is not None and other.ddp_importers == [] and len(scans) == 1  # one scan per project


@pytest.mark.parametrize("call, wraps", [
    ("model = DDP(model)", True),
    ("model = nn.parallel.DistributedDataParallel(model)", True),
    ("model = smart_DDP(model)", False),  # another name that ends in DDP
    ("model = NativeDDP (model)", False),
    ("model = MyDistributedDataParallel(model)", False),
])
def test_only_a_call_of_ddp_itself_makes_a_module_walked_for_its_wraps(call: str, wraps: bool,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import loopcheck.project.facts as facts_module
    from loopcheck.project.facts import ModuleReader

    source = f"from x import DDP, NativeDDP, smart_DDP\nfrom torch import nn\n\n\ndef main(model):\n    {call}\n"
    walked: list[object] = []
    real = facts_module.walk
    monkeypatch.setattr(facts_module, "walk", lambda node: walked.append(node) or real(node))
    outline = ModuleReader(source, "m.py").outline()
    assert outline.ddp_lines == ((6,) if wraps else ()) and bool(walked) is wraps


LOGGING_MODEL = """
    import torch.nn as nn
    import torch.nn.functional as F


    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm_head = nn.Linear(8, 4)

        def forward(self, ids, labels):
            dual_loss, align_loss, contras_loss = 0, 0, 0
            lm_loss = F.cross_entropy(self.lm_head(ids), labels)
            dual_loss = lm_loss.item()
            return lm_loss, dual_loss, align_loss, contras_loss
"""

LOGGING_LOOP = """
    import torch
    from model import Model


    def train(loader, max_steps):
        model = Model()
        optimizer = torch.optim.AdamW(model.parameters())
        losses, contras_losses, align_losses, dual_losses, step = [], [], [], [], 0
        while True:
            ids, labels = next(loader)
            model.train()
            step += 1
            loss, dual_loss, align_loss, contras_loss = model(ids, labels)
            losses.append(loss.item())
            if contras_loss != 0:
                contras_losses.append(contras_loss)
            if dual_loss != 0:
                dual_losses.append(dual_loss)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step >= max_steps:
                return losses, dual_losses, contras_losses
"""


def test_numbers_a_model_of_another_module_returns_beside_its_loss_hold_no_graph(project: Path, run_cli) -> None:
    # CodeExecutor's pretraining: `dual_loss = lm_loss.item()`, the others 0; a `.detach()` there
    # would raise AttributeError on the float
    write_project(project, {"train.py": LOGGING_LOOP, "model.py": LOGGING_MODEL})
    assert _codes(run_cli, "train.py") == []
    write_project(project, {"model.py": LOGGING_MODEL.replace("dual_loss = lm_loss.item()", "dual_loss = 0.5 * lm_loss")})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:19:") and " LC601 " in found[0] and "`dual_loss`" in found[0]


DICT_MODEL = """
    import torch.nn as nn
    import torch.nn.functional as F


    class KGRec(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(8, 4)

        def forward(self, x, y):
            rec_loss = F.cross_entropy(self.head(x), y)
            cl_loss = self.head(x).pow(2).mean()
            loss_dict = {"rec_loss": rec_loss.item(), "cl_loss": cl_loss.item()}
            return rec_loss + cl_loss, loss_dict
"""

DICT_LOOP = """
    from collections import defaultdict

    import torch
    from model import KGRec


    def train(loader, epochs):
        model = KGRec()
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(epochs):
            add_loss_dict = defaultdict(float)
            for x, y in loader:
                batch_loss, batch_loss_dict = model(x, y)
                optimizer.zero_grad()
                batch_loss.backward()
                optimizer.step()
                for k, v in batch_loss_dict.items():
                    add_loss_dict[k] += v
            print(epoch, dict(add_loss_dict))
"""


def test_a_dict_of_numbers_a_model_returns_beside_its_loss_holds_no_graph(project: Path, run_cli) -> None:
    # KGRec: `loss_dict = {"rec_loss": rec_loss.item(), ...}`, returned after the summed loss
    write_project(project, {"train.py": DICT_LOOP, "model.py": DICT_MODEL})
    assert _codes(run_cli, "train.py") == []
    write_project(project, {"model.py": DICT_MODEL.replace("rec_loss.item()", "rec_loss")})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and " LC601 " in found[0], found


COUNTING_MODEL = """
    import torch.nn as nn
    import torch.nn.functional as F


    class PromptModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(8, 4)

        def forward(self, x, y):
            def head_out():
                logits = self.head(x)
                loss = F.cross_entropy(logits, y)
                hit1 = 0
                for i in range(len(y)):
                    if logits[i].argmax() == y[i]:
                        hit1 += 1
                return loss, hit1

            return head_out()
"""

COUNTING_LOOP = """
    import torch
    from model import PromptModel


    def train(loader, epochs):
        model = PromptModel()
        optimizer = torch.optim.Adam(model.parameters())
        for epoch in range(epochs):
            hit1, tot_loss = 0, 0
            for x, y in loader:
                model.train()
                loss, batch_hit1 = model(x, y)
                hit1 += batch_hit1
                tot_loss += loss.item()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            print(epoch, hit1, tot_loss)
"""


def test_a_count_a_nested_helper_of_the_forward_returns_holds_no_graph(project: Path, run_cli) -> None:
    # P-tuning's LAMA model: `hit1 = 0 ... hit1 += 1` in `bert_out()`, returned through `return bert_out()`
    write_project(project, {"train.py": COUNTING_LOOP, "model.py": COUNTING_MODEL})
    assert _codes(run_cli, "train.py") == []
    write_project(project, {"model.py": COUNTING_MODEL.replace("hit1 += 1", "hit1 = hit1 + logits[i].sum()")})
    found = _codes(run_cli, "train.py")
    assert len(found) == 1 and found[0].startswith("train.py:14:") and " LC601 " in found[0]
    assert "`batch_hit1`" in found[0]


BACKWARD_HELPER = """
import torch


def backward(args, total_loss, scaler, optimizer, model):
    if scaler is not None:
        scaler.scale(total_loss).backward()
        if args.norm_gradient_clip is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.norm_gradient_clip)
        scaler.step(optimizer)
        scaler.update()
    else:
        total_loss.backward()
        optimizer.step()
"""

BACKWARD_HELPER_CALLER = """
import torch
from helpers import backward


def train(args, model, loader, optimizer, scaler):
    model.train()
    for images, texts in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = model(images, texts)
        backward(args, loss, scaler, optimizer, model)
"""


def test_helper_stepping_through_the_scaler_or_directly_steps_once(project: Path, run_cli) -> None:
    # open_clip's `backward(args, loss, scaler, optimizer, model)`: `scaler.step(optimizer)` in one
    # branch, `optimizer.step()` in the other; one of them runs per call, not both
    write_project(project, {"train.py": BACKWARD_HELPER_CALLER, "helpers.py": BACKWARD_HELPER})
    assert _codes(run_cli, "train.py") == []


def test_a_second_step_after_the_helper_is_still_a_double_step(project: Path, run_cli) -> None:
    for scaler in ("scaler", "None"):
        caller = BACKWARD_HELPER_CALLER.replace("backward(args, loss, scaler, optimizer, model)",
                                                f"backward(args, loss, {scaler}, optimizer, model)\n"
                                                "        optimizer.step()")
        write_project(project, {"train.py": caller, "helpers.py": BACKWARD_HELPER})
        found = _codes(run_cli, "train.py")
        steps = [f for f in found if " LC109 " in f]
        assert len(steps) == 1 and steps[0].startswith("train.py:13:"), found
        others = [f for f in found if f not in steps]
        if scaler == "scaler":
            assert others == [], found
        else:  # handed None, the helper back-propagates the float16 loss unscaled: LC205 too
            assert len(others) == 1 and " LC205 " in others[0] and others[0].startswith("train.py:10:"), found


@pytest.mark.parametrize("framework", ["paddle", "mxnet"])
def test_a_file_of_another_framework_stays_out_of_scope_with_the_project_read(project: Path, run_cli,
                                                                              framework: str) -> None:
    # the scaler's `step(optimizer)` in another module is an optimizer step by its facts, but the file's
    # loop is another framework's: its `clear_grad()` is that framework's zeroing
    scaler = """
        class LSCGradScaler:
            def __init__(self, init_loss_scaling=1024.0):
                self._scale = init_loss_scaling

            def scale(self, var):
                return var * self._scale

            def step(self, optimizer):
                for param in optimizer._parameter_list:
                    if param.grad is not None:
                        param.grad.set_value(param.grad / self._scale)
                optimizer.step()
    """
    train = f"""
        import {framework}

        from amp import LSCGradScaler


        def train(args, backbone, classifier, optimizer, train_loader):
            scaler = LSCGradScaler(init_loss_scaling=1024.0)
            for epoch in range(args.train_num_epochs):
                for step, (img, label) in enumerate(train_loader):
                    loss_v = classifier(backbone(img), label)
                    scaler.scale(loss_v).backward()
                    scaler.step(optimizer)
                    optimizer.clear_grad()
    """
    write_project(project, {"amp.py": scaler, "train.py": train})
    assert _codes(run_cli, "train.py") == []
    write_project(project, {"train.py": train.replace(f"import {framework}", "import torch")})
    assert any(" LC103 " in line for line in _codes(run_cli, "train.py"))  # the same loop in torch


def test_a_teacher_forwarded_only_under_no_grad_may_stay_in_eval_mode(project: Path, run_cli) -> None:
    # SCHP's self-correction: an averaged copy of the model (no optimizer's) gives soft labels under
    # no_grad; the helpers of another module re-estimate its BatchNorm in train mode and validate it
    helpers = """
    import torch


    def bn_re_estimate(loader, model):
        model.train()
        with torch.no_grad():
            for images, _ in loader:
                model(images)


    def validate(model, loader):
        model.eval()
        with torch.no_grad():
            return sum(float((model(x).argmax(1) == y).float().mean()) for x, y in loader) / len(loader)
    """
    train = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from schp import bn_re_estimate, validate


    def build(num_classes=20):
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, num_classes, 1))


    def train(train_loader, val_loader, epochs=150, cycle_epochs=10):
        model = build()
        schp_model = build()
        optimizer = torch.optim.SGD(model.parameters(), lr=7e-3, momentum=0.9, weight_decay=5e-4)
        for epoch in range(epochs):
            cycle_n = max(0, (epoch - 100) // cycle_epochs)
            model.train()
            for images, labels in train_loader:
                preds = model(images)
                loss = F.cross_entropy(preds, labels)
                if cycle_n >= 1:
                    with torch.no_grad():
                        soft_preds = schp_model(images)
                    loss = loss + F.kl_div(F.log_softmax(preds, 1), F.softmax(soft_preds, 1), reduction="batchmean")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            if epoch >= 100 and (epoch - 100) % cycle_epochs == 0:
                with torch.no_grad():
                    for avg, cur in zip(schp_model.parameters(), model.parameters()):
                        avg.mul_(1 - 1.0 / (cycle_n + 1)).add_(cur, alpha=1.0 / (cycle_n + 1))
                bn_re_estimate(train_loader, schp_model)
                print(epoch, validate(schp_model, val_loader))
    """
    write_project(project, {"schp.py": helpers, "train.py": train})
    assert _codes(run_cli, "--extend-select", "LC605", "train.py") == []
    trained = train.replace("model.parameters(), lr=7e-3", "[*model.parameters(), *schp_model.parameters()], lr=7e-3")
    assert trained != train
    write_project(project, {"train.py": trained})
    assert [" LC605 " in line for line in _codes(run_cli, "--extend-select", "LC605", "train.py")] == [True]


@pytest.mark.parametrize("exported", [False, True])
def test_an_inherited_evaluation_method_of_another_module_leaves_eval_mode(project: Path, run_cli,
                                                                          exported: bool) -> None:
    # `self._test_classification(model)` of a base class of another module (imported directly, or
    # re-exported by the package's `__init__.py` with an absolute import) leaves the model in eval mode
    base = """
        import torch


        class BaseTrainer:
            def _test_classification(self, model):
                model.eval()
                with torch.no_grad():
                    return 0.0
    """
    trainer = f"""
        import torch
        from {"pkg" if exported else "pkg.base"} import BaseTrainer


        class Trainer(BaseTrainer):
            def train(self, model, loader, epochs):
                optimizer = torch.optim.Adam(model.parameters(), 3e-4)
                for epoch in range(epochs):
                    for x in loader:
                        optimizer.zero_grad()
                        loss = model(x).sum()
                        loss.backward()
                        optimizer.step()
                    self._test_classification(model)
    """
    write_project(project, {"pkg/__init__.py": "from pkg.base import BaseTrainer\n" if exported else "",
                            "pkg/base.py": base, "pkg/trainer.py": trainer})
    found = _codes(run_cli, "--extend-select", "LC605", "pkg/trainer.py")
    assert len(found) == 1 and " LC605 " in found[0] and "pkg/base.py:6" in found[0], found
    restored = base.replace("                    return 0.0\n", "                    accuracy = 0.0\n"
                                                        "                model.train()\n                return accuracy\n")
    assert restored != base
    write_project(project, {"pkg/base.py": restored})
    assert _codes(run_cli, "--extend-select", "LC605", "pkg/trainer.py") == []


def test_an_accumulation_count_the_caller_passes_beside_a_warmup_reset(project: Path, run_cli) -> None:
    # yolov3-spp's `train_one_epoch(..., accumulate, warmup)` sets `accumulate = 1` for the warmup epoch
    # only: the count is what the caller of another module passes; and `ni = i + nb * epoch` with
    # `nb = len(data_loader)` runs on across the calls (the window that spans two epochs is whole)
    engine = """
        import torch


        def train_one_epoch(model, optimizer, data_loader, device, epoch, accumulate, warmup=False):
            model.train()
            if epoch == 0 and warmup is True:
                accumulate = 1
            nb = len(data_loader)
            for i, (imgs, targets) in enumerate(data_loader):
                ni = i + nb * epoch
                loss = torch.nn.functional.mse_loss(model(imgs.to(device)), targets.to(device))
                loss.backward()
                if ni % accumulate == 0:
                    optimizer.step()
                    optimizer.zero_grad()
    """
    main = """
        import os

        import torch
        import torch.distributed as dist

        from engine import train_one_epoch


        def main(args, model, loader):
            dist.init_process_group("nccl")
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[int(os.environ["LOCAL_RANK"])])
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937)
            accumulate = max(round(64 / (dist.get_world_size() * args.batch_size)), 1)
            for epoch in range(args.epochs):
                train_one_epoch(model, optimizer, loader, "cuda", epoch, accumulate=accumulate, warmup=True)
    """
    write_project(project, {"engine.py": engine, "main.py": main})
    assert [line.split()[1] for line in _codes(run_cli, "engine.py")] == ["LC501"]
    # where the file's own call passes 1, the count is 1 as shipped: the condition gates nothing
    called = engine + "\n\n        train_one_epoch(None, None, [], 'cpu', 0, accumulate=1)\n"
    write_project(project, {"engine.py": called})
    assert _codes(run_cli, "engine.py") == []


@pytest.mark.parametrize(("built", "lines"), [
    ("torch.optim.Adam(self.model.arch_parameters(), lr=3e-4)", [12]),  # the Architect's own optimizer
    ("optimizer", [11, 12, 13]),  # the weight optimizer handed in: the same object, `step` zeroes it too
])
def test_the_zeroing_of_an_optimizer_another_object_builds_for_itself(project: Path, run_cli, built: str,
                                                                      lines: list[int]) -> None:
    # SDARTS's chunk loop clears the weight optimizer (wrongly: it accumulates over the chunks) and the
    # Architect's own Adam, which `architect.step` zeroes and steps per chunk
    architect = f"""
        import torch


        class Architect:
            def __init__(self, model, optimizer):
                self.model = model
                self.optimizer = {built}

            def step(self, x, y):
                self.optimizer.zero_grad()
                self.model.loss(x, y).backward()
                self.optimizer.step()
    """
    search = """
        import torch
        from architect import Architect


        def train(model, batches, optimizer, small_batch_size):
            architect = Architect(model, optimizer)
            for data, targets in batches:
                optimizer.zero_grad()
                for start in range(0, len(data), small_batch_size):
                    architect.step(data[start:start + small_batch_size], targets[start:start + small_batch_size])
                    optimizer.zero_grad()
                    architect.optimizer.zero_grad()
                    loss = model.loss(data[start:start + small_batch_size], targets[start:start + small_batch_size])
                    loss.backward()
                optimizer.step()
    """
    write_project(project, {"architect.py": architect, "search.py": search})
    found = _codes(run_cli, "search.py")
    assert sorted(int(line.split(":")[1]) for line in found if " LC101 " in line) == lines, found


@pytest.mark.parametrize(("imported", "clipped", "flagged"), [
    (True, False, False),  # the caller of another module builds the optimizer (an AdamW there: inert)
    (True, True, True),  # the clip meets the N-fold sum whatever the optimizer
    (False, False, True),  # nothing of the project calls the loop: the optimizer is not known to be handed in
])
def test_an_undivided_loss_whose_optimizer_a_caller_of_another_module_hands_in(project: Path, run_cli, imported: bool,
                                                                                clipped: bool, flagged: bool) -> None:
    loops = """
        import gc

        import torch
        from tqdm import tqdm


        def train_loop(model, train_loader, optimizer, criterion, scheduler, args, iteration):
            model.train()
            avg_loss = 0.0
            for idx, batch in enumerate(tqdm(train_loader, desc="Train", ncols=80)):
                input_ids, input_masks, labels = (t.cuda() for t in batch)
                logits = model(input_ids=input_ids.long(), attention_mask=input_masks)
                loss = criterion(logits, labels)
                loss.backward()
                if (iteration + 1) % args.batch_accumulation == 0:
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                iteration += 1
                avg_loss += loss.item() / (len(train_loader) * args.batch_accumulation)
            torch.cuda.empty_cache()
            gc.collect()
            return avg_loss, iteration
    """
    if clipped:
        loops = loops.replace("                    optimizer.step()\n",
                              "                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                              "                    optimizer.step()\n")
    run = """
        import torch
        from loops import train_loop
        from model import get_model_optimizer

        model, optimizer = get_model_optimizer(args)
        train_loop(model, train_loader, optimizer, criterion, scheduler, args, 0)
    """
    write_project(project, {"loops.py": loops, **({"run.py": run} if imported else {})})
    assert [" LC102 " in line for line in _codes(run_cli, "loops.py")] == ([True] if flagged else [])
