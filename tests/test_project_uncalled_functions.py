"""A finding in a function that the script's entry point never runs (``main()`` left beside the
``main_lightning()`` that ``if __name__ == "__main__":`` now calls, and the epoch function only it
calls) describes dead code: it is not reported, unless another module, script or notebook of the
project imports the script, something else in the file names the function (a call, a table, a
decorator, a string), or the file looks functions up by name (``globals()``, ``fire.Fire()``). In a
repository that is no installable package, a module that runs nothing itself and that no file imports
is dead code too."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.projects import OLD_AMP_TRAINER, write_project

SCRIPT = """
    import torch


    def train_epoch(model, loader, optimizer):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()


    def main():
        model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            train_epoch(model, [(torch.randn(8, 4), torch.randint(0, 2, (8,)))], optimizer)


    def main_lightning():
        print("trained by Lightning")


    if __name__ == "__main__":
        # main()
        {entry}()
"""


def _indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines())


def _missing_zero_grad(run_cli, path: str = "train.py") -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC103", path)
    assert "LC001" not in out and "LC000" not in out  # analysed
    return [line for line in out.splitlines() if ": LC103" in line]


def test_a_function_the_entry_point_never_runs_is_silent(project: Path, run_cli) -> None:
    write_project(project, {"train.py": SCRIPT.format(entry="main_lightning")})
    assert _missing_zero_grad(run_cli) == []


def test_the_same_function_run_by_the_entry_point_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"train.py": SCRIPT.format(entry="main")})
    assert len(_missing_zero_grad(run_cli)) == 1


@pytest.mark.parametrize("importer", ["from train import main\nmain()\n", "import train\n",
                                      "from . import train\n"])
def test_a_script_another_module_imports_is_reported(project: Path, run_cli, importer: str) -> None:
    write_project(project, {"train.py": SCRIPT.format(entry="main_lightning"), "run_all.py": importer})
    assert len(_missing_zero_grad(run_cli)) == 1


def test_a_notebook_that_imports_the_script_keeps_the_finding(project: Path, run_cli) -> None:
    # as Jupyter writes it: one line of the cell's source per line of the file
    notebook = json.dumps({"cells": [{"cell_type": "code", "source": ["from train import main\n", "main()"]}]},
                          indent=1)
    write_project(project, {"train.py": SCRIPT.format(entry="main_lightning"), "demo.ipynb": notebook})
    assert len(_missing_zero_grad(run_cli)) == 1


@pytest.mark.parametrize("naming", ["RUNS = {'plain': main}", "RUNS = ['main']", "import fire\nfire.Fire()",
                                    "print(globals())"])
def test_a_function_the_file_names_or_looks_up_is_reported(project: Path, run_cli, naming: str) -> None:
    write_project(project, {"train.py": SCRIPT.format(entry="main_lightning") + _indented(naming)})
    assert len(_missing_zero_grad(run_cli)) == 1


@pytest.mark.parametrize(("top", "found"), [
    # a notebook exported to a script (Kaggle's PetFinder experiments): module-level code runs the folds
    ("for fold in range(5):\n    main_lightning()", 0),
    ("main_lightning()", 0),
    ("for fold in range(5):\n    main()", 1),
    ("main()", 1),
])
def test_a_script_run_by_its_module_level_code(project: Path, run_cli, top: str, found: int) -> None:
    script = SCRIPT.split("    if __name__")[0] + _indented(top)
    write_project(project, {"train.py": script})
    assert len(_missing_zero_grad(run_cli)) == found


def test_a_module_without_an_entry_point_is_reported(project: Path, run_cli) -> None:
    library = SCRIPT.format(entry="main_lightning").split("if __name__")[0]
    write_project(project, {"train.py": library})
    assert len(_missing_zero_grad(run_cli)) == 1


def test_a_new_importer_invalidates_the_cached_result(project: Path, run_cli) -> None:
    write_project(project, {"train.py": SCRIPT.format(entry="main_lightning")})
    assert _missing_zero_grad(run_cli) == []
    (project / "sweep.py").write_text("from train import main\n")
    assert len(_missing_zero_grad(run_cli)) == 1


def _research_repository(root: Path, files: dict[str, str]) -> None:
    """A repository that is no installable package: a git checkout without setup.py or pyproject.toml."""
    (root / ".git").mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))


LIBRARY = SCRIPT.format(entry="main_lightning").split("if __name__")[0]


def test_a_module_nothing_imports_in_a_repository_that_is_no_package_is_silent(project: Path, run_cli) -> None:
    # a helper module left behind (utils/imagenet/train_and_eval.py that no script imports any more)
    _research_repository(project, {"utils/imagenet/train_and_eval.py": "import logging\nlogger = logging.getLogger()\n"
                                   + textwrap.dedent(LIBRARY), "main.py": "from utils.misc import seed\n"})
    assert _missing_zero_grad(run_cli, ".") == []


@pytest.mark.parametrize("files", [
    {"main.py": "from utils.imagenet.train_and_eval import main\nmain()\n"},  # imported
    {"main.py": "from utils.imagenet import train_and_eval\n"},
    {"run.ipynb": json.dumps({"cells": [{"cell_type": "code", "source": ["import train_and_eval\n"]}]},
                             indent=1)},
    {"utils/imagenet/train_and_eval.py": textwrap.dedent(LIBRARY) + "main()\n"},  # runs something itself
    {"setup.py": "from setuptools import setup\nsetup(name='lib')\n"},  # a package its users import
    # sacred's `@ex.automain` runs the function when the file is run as a script
    {"utils/imagenet/train_and_eval.py": "from sacred import Experiment\nex = Experiment()\n"
                                         + textwrap.dedent(LIBRARY).replace("def main():", "@ex.automain\ndef main():")},
    {"train.ipynb": json.dumps({"cells": [{"outputs": ["x" * 2_100_000]}]})},  # too large to read: may import it
])
def test_a_module_that_is_imported_runs_itself_or_is_packaged_is_reported(project: Path, run_cli,
                                                                          files: dict[str, str]) -> None:
    _research_repository(project, {"utils/imagenet/train_and_eval.py": LIBRARY, **files})
    assert len(_missing_zero_grad(run_cli, ".")) == 1


def test_a_module_a_config_names_is_reported(project: Path, run_cli) -> None:
    # Hydra imports what `_target_` names: the module is not dead though no Python file imports it
    _research_repository(project, {"src/models/train_and_eval.py": LIBRARY,
                                   "configs/model.yaml": "_target_: src.models.train_and_eval.main\n"})
    assert len(_missing_zero_grad(run_cli, ".")) == 1


def test_a_script_checked_for_rules_that_read_an_excerpt_is_not_read_as_a_module(project: Path, run_cli) -> None:
    # LC206 reads only the statements that name the AMP API: the entry point is not in that excerpt
    _research_repository(project, {"train.py": OLD_AMP_TRAINER})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC206", "train.py")
    assert out.count(": LC206") == 2, out
    _research_repository(project, {"train.py": OLD_AMP_TRAINER.split("    if __name__")[0]})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC206", "train.py")
    assert ": LC206" not in out  # a module nothing runs or imports


def test_a_function_wrapped_by_no_grad_runs_nothing_at_import(project: Path, run_cli) -> None:
    # `@torch.no_grad()` wraps `evaluate`: the module still runs nothing itself, and nothing imports it
    evaluate = "\n\n@torch.no_grad()\ndef evaluate(model, loader):\n    return [model(x) for x, _ in loader]\n"
    _research_repository(project, {"utils/train_and_eval.py": textwrap.dedent(LIBRARY) + evaluate,
                                   "main.py": "from utils.misc import seed\n"})
    assert _missing_zero_grad(run_cli, ".") == []


def test_a_copy_of_the_module_elsewhere_does_not_keep_it(project: Path, run_cli) -> None:
    # two sub-projects each left a copy of the same helper module behind; neither is imported
    _research_repository(project, {"a/utils/train_and_eval.py": LIBRARY, "b/utils/train_and_eval.py": LIBRARY})
    assert _missing_zero_grad(run_cli, ".") == []


@pytest.mark.parametrize("importer", ["from utils.train_and_eval import main\nmain()\n",
                                      "from utils import train_and_eval\n",
                                      "import utils.train_and_eval as te\n"])
def test_a_copy_another_folder_imports_keeps_only_that_copy(project: Path, run_cli, importer: str) -> None:
    # `b/run.py` loads its own folder's copy (b/utils/...), its folder coming first on sys.path
    _research_repository(project, {"a/utils/train_and_eval.py": LIBRARY, "b/utils/train_and_eval.py": LIBRARY,
                                   "b/run.py": importer})
    found = _missing_zero_grad(run_cli, ".")
    assert len(found) == 1 and found[0].startswith("b/utils/train_and_eval.py:"), found


def test_an_import_that_loads_no_file_of_the_project_keeps_every_copy(project: Path, run_cli) -> None:
    # `utils.train_and_eval` from c/run.py finds no `c/utils`: a root on PYTHONPATH may hold either copy
    _research_repository(project, {"a/utils/train_and_eval.py": LIBRARY, "b/utils/train_and_eval.py": LIBRARY,
                                   "c/run.py": "from utils.train_and_eval import main\nmain()\n"})
    assert len(_missing_zero_grad(run_cli, ".")) == 2


HELPERS = """
    import torch


    def train_eval(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()


    def train_eval_lwf(model, loader, optimizer):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
"""


def test_a_function_of_an_imported_module_that_nothing_names_is_silent(project: Path, run_cli) -> None:
    # LUCIR's utils_incremental/train_eval.py: main.py imports train_eval, and train_eval_lwf is left beside it
    _research_repository(project, {"utils_incremental/train_eval.py": HELPERS,
                                   "main.py": "from utils_incremental.train_eval import train_eval\ntrain_eval(1, 2, 3)\n"})
    assert _missing_zero_grad(run_cli, ".") == []


@pytest.mark.parametrize("files", [
    {"main.py": "from utils_incremental.train_eval import train_eval_lwf\ntrain_eval_lwf(1, 2, 3)\n"},
    {"main.py": "from utils_incremental import train_eval\ntrain_eval.train_eval_lwf(1, 2, 3)\n"},
    {"README.md": "Run `train_eval_lwf` for the LwF baseline.\n",
     "main.py": "from utils_incremental.train_eval import train_eval\n"},
    # looked up by a name the caller builds
    {"main.py": "from utils_incremental import train_eval\ngetattr(train_eval, 'train_eval_' + mode)(1, 2, 3)\n"},
    # named in the module itself
    {"main.py": "from utils_incremental.train_eval import train_eval\n",
     "utils_incremental/train_eval.py": HELPERS + "\n    BASELINES = {'lwf': train_eval_lwf}\n"},
])
def test_a_function_of_an_imported_module_named_anywhere_is_reported(project: Path, run_cli,
                                                                     files: dict[str, str]) -> None:
    _research_repository(project, {"utils_incremental/train_eval.py": HELPERS, **files})
    assert len(_missing_zero_grad(run_cli, ".")) == 1


ENGINES = """
    import torch


    class Engine:
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer

        def train(self, loader):
            for x, y in loader:
                self.optimizer.zero_grad()
                torch.nn.functional.cross_entropy(self.model(x), y).backward()
                self.optimizer.step()


    class SWAEngine(Engine):
        def train(self, loader):
            for x, y in loader:
                torch.nn.functional.cross_entropy(self.model(x), y).backward()
                self.optimizer.step()
"""


@pytest.mark.parametrize(("files", "found"), [
    # chaii's engine.py: the training scripts import Engine; SWAEngine is left beside it
    ({"train.py": "from engine import Engine\nEngine(1, 2).train([])\n"}, 0),
    ({"train.py": "from engine import Engine, SWAEngine\nSWAEngine(1, 2).train([])\n"}, 1),
    ({"train.py": "import engine\nengine.SWAEngine(1, 2).train([])\n"}, 1),
    ({"train.py": "from engine import Engine\n", "configs/swa.yaml": "engine: SWAEngine\n"}, 1),
    # commonlit_ess's `getattr(trainer, cfg.name)(cfg, g)`: a class a configuration names, or none
    ({"train.py": "import engine\ngetattr(engine, cfg.name)(1, 2).train([])\n",
      "configs/base.json": '{"name": "Engine"}\n'}, 0),
    ({"train.py": "import engine\ngetattr(engine, cfg['name'])(1, 2).train([])\n",
      "configs/swa.json": '{"name": "SWAEngine"}\n'}, 1),
    # a name the caller builds may be any
    ({"train.py": "import engine\ngetattr(engine, kind + 'Engine')(1, 2).train([])\n"}, 1),
])
def test_a_class_of_an_imported_module_that_nothing_names_is_silent(project: Path, run_cli, files: dict[str, str],
                                                                    found: int) -> None:
    _research_repository(project, {"engine.py": ENGINES, **files})
    assert len(_missing_zero_grad(run_cli, ".")) == found
