"""An accumulation finding whose window count is a configuration key that everything the project ships
leaves inert (every config sets it to 1 or 0, no command-line option sets it) describes a loop the
project never runs accumulating: it is not reported. A key that a shipped config, launch script or
README command sets above 1, one that a command-line option sets, one mentioned without a value, or
one found nowhere keeps the finding. Shapes: a hydra workspace (``self.global_step %
cfg.training.gradient_accumulate_every == 0``, every YAML at 1) and a Swin-style loop (``if
config.TRAIN.ACCUMULATION_STEPS > 1:``, a yacs default 0, with or without ``--accumulation-steps``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopcheck.project.inert_settings import _values
from tests.projects import write_project

WORKSPACE = """
    import torch


    class TrainWorkspace:
        def run(self, cfg, model, optimizer, loader):
            for epoch in range(cfg.training.num_epochs):
                for batch in loader:
                    loss = model(batch).mean() / cfg.training.gradient_accumulate_every
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    if self.global_step % cfg.training.gradient_accumulate_every == 0:
                        optimizer.step()
                        optimizer.zero_grad()
                    self.global_step += 1
"""

CONFIG = """
    training:
      num_epochs: 100
      gradient_accumulate_every: {n}
      use_ema: True
"""

SWIN_LOOP = """
    import torch


    def train_one_epoch(config, model, data_loader, optimizer):
        optimizer.zero_grad()
        for idx, (samples, targets) in enumerate(data_loader):
            loss = model(samples, targets)
            if config.TRAIN.ACCUMULATION_STEPS > 1:
                loss = loss / config.TRAIN.ACCUMULATION_STEPS
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.TRAIN.CLIP_GRAD)
                if (idx + 1) % config.TRAIN.ACCUMULATION_STEPS == 0:
                    optimizer.step()
                    optimizer.zero_grad()
            else:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
"""

YACS_DEFAULTS = """
    from yacs.config import CfgNode as CN

    _C = CN()
    _C.TRAIN = CN()
    _C.TRAIN.CLIP_GRAD = 5.0
    # Gradient accumulation steps
    _C.TRAIN.ACCUMULATION_STEPS = 0
"""

YACS_WITH_OPTION = YACS_DEFAULTS + """

    def update_config(config, args):
        if args.accumulation_steps:
            config.TRAIN.ACCUMULATION_STEPS = args.accumulation_steps
"""

MAIN_WITH_OPTION = """
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument('--accumulation-steps', type=int, help="gradient accumulation steps")
"""


def _clips(run_cli, path: str) -> list[str]:
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC107", path)
    assert "LC001" not in out  # analysed
    return [line for line in out.splitlines() if ": LC107" in line]


def test_every_shipped_config_at_one_is_silent(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "config/image.yaml": CONFIG.format(n=1),
                            "README.md": "Train with `python train.py --config-name=lowdim`.\n"})
    assert _clips(run_cli, "workspace/train.py") == []


def test_a_shipped_config_that_accumulates_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "config/image.yaml": CONFIG.format(n=4)})
    found = _clips(run_cli, "workspace/train.py")
    assert len(found) == 1 and "(only when `cfg.training.gradient_accumulate_every` > 1)" in found[0]


def test_a_launch_script_that_accumulates_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "scripts/big.sh": "python train.py training.gradient_accumulate_every=8\n"})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_a_readme_command_that_accumulates_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "README.md": "```\npython train.py --gradient_accumulate_every 4\n```\n"})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_a_key_the_readme_documents_without_a_value_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "README.md": "Raise `gradient_accumulate_every` to train on a smaller GPU.\n"})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_a_key_found_nowhere_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": "training:\n  num_epochs: 1\n"})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_a_python_default_without_an_option_is_silent(project: Path, run_cli) -> None:
    # yacs default 0, no argparse option, no config file that sets it
    write_project(project, {"main.py": SWIN_LOOP, "config.py": YACS_DEFAULTS,
                            "configs/swin_tiny.yaml": "MODEL:\n  TYPE: swin\n"})
    assert _clips(run_cli, "main.py") == []


def test_a_command_line_option_copied_into_the_key_is_reported(project: Path, run_cli) -> None:
    # `--accumulation-steps` (argparse, help text) writes config.TRAIN.ACCUMULATION_STEPS
    write_project(project, {"main.py": SWIN_LOOP + MAIN_WITH_OPTION, "config.py": YACS_WITH_OPTION})
    found = _clips(run_cli, "main.py")
    assert len(found) == 1 and "(only when `config.TRAIN.ACCUMULATION_STEPS` > 1)" in found[0]


def test_a_dataclass_field_a_parser_makes_an_option_of_is_reported(project: Path, run_cli) -> None:
    # HfArgumentParser gives every field a --flag: the field's default 1 is an option's default
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "arguments.py": """
        from dataclasses import dataclass
        from transformers import HfArgumentParser


        @dataclass
        class Training:
            gradient_accumulate_every: int = 1


        training, = HfArgumentParser(Training).parse_args_into_dataclasses()
    """})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_click_options_of_other_scripts_leave_the_key_inert(project: Path, run_cli) -> None:
    # click spells its options (`@click.option("--output")`): none of them is the key
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "eval.py": """
        import click

        @click.command()
        @click.option("--output", "-o")
        def main(output):
            pass
    """})
    assert _clips(run_cli, "workspace/train.py") == []


@pytest.mark.parametrize(("key", "dataclass", "found"), [
    ("gradient_accumulation_steps", "", 1),  # one of TrainingArguments' own options
    ("gradient_accumulate_every", "@dataclass\n        class Config:\n            gradient_accumulate_every: int = 1\n", 1),
    ("gradient_accumulate_every", "", 0),  # no option of the parser: the launch script's 1 is all there is
])
def test_a_library_dataclass_a_parser_makes_options_of_is_reported(project: Path, run_cli, key: str, dataclass: str,
                                                                   found: int) -> None:
    # transformers' TrainingArguments give --gradient_accumulation_steps, and a project dataclass handed
    # beside them gives its fields; a launch script passes 1
    handed = "(Config, TrainingArguments)" if dataclass else "TrainingArguments"
    write_project(project, {"workspace/train.py": WORKSPACE.replace("gradient_accumulate_every", key),
                            "scripts/run.sh": f"python train.py --{key} 1\n", "main.py": f"""
        from dataclasses import dataclass

        from transformers import HfArgumentParser, TrainingArguments


        {dataclass}
        args = HfArgumentParser({handed}).parse_args_into_dataclasses()
    """})
    assert len(_clips(run_cli, "workspace/train.py")) == found


def test_options_made_of_a_configs_keys_are_reported(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "cli.py": """
        import argparse

        def parser_of(config):
            parser = argparse.ArgumentParser()
            for key, value in config.items():
                parser.add_argument(f"--{key}", default=value)
            return parser
    """})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_a_root_no_marker_names_is_reported(project: Path, run_cli) -> None:
    # no .git, pyproject.toml or setup.py: the root is guessed, and what lies beside it is not read
    write_project(project, {"workspace/train.py": WORKSPACE, "workspace/lowdim.yaml": CONFIG.format(n=1)})
    (project / "pyproject.toml").unlink()
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_a_changed_config_invalidates_the_cached_result(project: Path, run_cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from loopcheck import checker

    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1)})
    first = run_cli("check", "workspace/train.py")
    assert first[0] == 0 and "LC107" not in first[1]
    with monkeypatch.context() as patched:  # the configs unchanged: the cached result holds
        patched.setattr(checker, "_check_job", _not_checked_again)
        assert run_cli("check", "workspace/train.py") == first
    (project / "config" / "lowdim.yaml").write_text(CONFIG.format(n=16))
    assert len(_clips(run_cli, "workspace/train.py")) == 1  # from the cache, had the configs not been in its key
    (project / "config" / "lowdim.yaml").write_text(CONFIG.format(n=1))
    assert _clips(run_cli, "workspace/train.py") == []
    (project / "config" / "big.yaml").write_text(CONFIG.format(n=2))  # a new config file
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def _not_checked_again(*args: object) -> None:
    raise AssertionError("checked again although nothing it read changed")


def test_values_read_from_configs_scripts_and_python() -> None:
    assert _values(b"training:\n  gradient_accumulate_every: 1 # one\n", "gradient_accumulate_every", False) == [1]
    assert _values(b'{"accum_iter": 8, "lr": 1}', "accum_iter", False) == [2]
    assert _values(b"accum_iter: null\n", "accum_iter", False) == [0]
    assert _values(b"accum_iter: ${oc.env:accum}\n", "accum_iter", False) == [None]
    assert _values(b"python main.py --opts train.accumulation_steps=8", "accumulation_steps", False) == [2]
    assert _values(b"python main.py --accumulation_steps $acc", "accumulation_steps", False) == [None]
    # in Python: reads say nothing, a literal is a value, anything else (an option, an expression) is unclear
    assert _values(b"loss = loss / cfg.accum_iter\nif cfg.accum_iter > 1:\n    pass\n", "accum_iter", True) == []
    assert _values(b"accum_iter: int = 1\n", "accum_iter", True) == [1]
    assert _values(b"cfg = dict(accum_iter=4)\n", "accum_iter", True) == [2]
    assert _values(b"self.accum_iter = accum_iter\n", "accum_iter", True) == [None]
    assert _values(b"parser.add_argument('--accum_iter', default=1)", "accum_iter", True) == [None]
    assert _values(b"parser.add_argument('--accum', dest='accum_iter')", "accum_iter", True) == [None]
    assert _values(b"flags.define_integer('accum_iter', 1, 'steps')", "accum_iter", True) == [None]
    assert _values(b"config = {'accum_iter': 1}", "accum_iter", True) == [1]


def test_a_sibling_sub_project_that_sets_the_key_leaves_it_inert_here(project: Path, run_cli) -> None:
    # each top folder ships its own README: what one sets says nothing of the other's runs
    write_project(project, {"vlt5/README.md": "Train with `python train.py --config-name=lowdim`.\n",
                            "vlt5/workspace/train.py": WORKSPACE, "vlt5/config/lowdim.yaml": CONFIG.format(n=1),
                            "clip/README.md": "python train.py training.gradient_accumulate_every=8\n",
                            "clip/train.py": "print('another project')\n"})
    assert _clips(run_cli, "vlt5/workspace/train.py") == []
    (project / "README.md").write_text("python vlt5/train.py training.gradient_accumulate_every=2\n")  # the root's
    assert len(_clips(run_cli, "vlt5/workspace/train.py")) == 1


def test_a_folder_without_a_readme_of_its_own_speaks_for_the_project(project: Path, run_cli) -> None:
    write_project(project, {"vlt5/README.md": "Train with `python train.py`.\n", "vlt5/workspace/train.py": WORKSPACE,
                            "vlt5/config/lowdim.yaml": CONFIG.format(n=1),
                            "scripts/big.sh": "python vlt5/train.py training.gradient_accumulate_every=8\n"})
    assert len(_clips(run_cli, "vlt5/workspace/train.py")) == 1


MICRO_STEPS = """
    import torch


    def train_epoch(args, supernet, loader, optimizer):
        for inputs, targets in loader:
            optimizer.zero_grad()
            for up_idx in range(args.update_frequency):
                loss = torch.nn.functional.cross_entropy(supernet(inputs), targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(supernet.parameters(), 5.0)
            optimizer.step()
"""

PIPELINE = "update_frequency: {n} # set equal to num_ops when fair sample\n"


@pytest.mark.parametrize(("n", "found"), [(1, 0), (4, 1)])
def test_a_micro_step_count_every_shipped_config_leaves_at_one(project: Path, run_cli, n: int, found: int) -> None:
    # DNA's distill_train.py: `for up_idx in range(args.update_frequency):`, train_pipeline.yaml's 1
    write_project(project, {"dna/train.py": MICRO_STEPS, "initialize/train_pipeline.yaml": PIPELINE.format(n=n)})
    assert len(_clips(run_cli, "dna/train.py")) == found


KEYED_LOOP = """
    import json
    import sys

    import torch


    def train(config, model, loader, optimizer):
        grad_accumulation = config["grad_accumulation"]
        for epoch in range(config["epochs"]):
            for step, batch in enumerate(loader):
                loss = model(batch).mean()
                loss.backward()
                if (step + 1) % grad_accumulation == 0:
                    optimizer.step()
                    optimizer.zero_grad()


    if __name__ == "__main__":
        train(json.load(open(sys.argv[1])), torch.nn.Linear(4, 1), [], None)
"""


@pytest.mark.parametrize(("n", "found"), [(1, 0), (4, 1)])
def test_a_local_bound_to_a_config_key_every_json_config_sets(project: Path, run_cli, n: int, found: int) -> None:
    # `grad_accumulation = config["grad_accumulation"]`: the key the JSON configs set, read through a local
    configs = {f"configs/exp_{i}.json": f'{{"epochs": 5, "grad_accumulation": {v}}}\n' for i, v in enumerate((1, n))}
    write_project(project, {"train.py": KEYED_LOOP, **configs})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC102", "train.py")
    lines = [line for line in out.splitlines() if ": LC102" in line]
    assert len(lines) == found
    assert all('(only when `config["grad_accumulation"]` > 1)' in line for line in lines)


@pytest.mark.parametrize(("n", "found"), [(1, 0), (4, 1)])
def test_a_key_of_a_nested_config_every_yaml_config_sets(project: Path, run_cli, n: int, found: int) -> None:
    # llm-science-exam: `cfg_dict["train_params"]["grad_accumulation"]`, each Hydra config at 1
    loop = KEYED_LOOP.replace('config["grad_accumulation"]', 'config["train_params"]["grad_accumulation"]')
    configs = {f"conf/exp_{i}.yaml": f"train_params:\n  epochs: 5\n  grad_accumulation: {v}\n"
               for i, v in enumerate((1, n))}
    write_project(project, {"train.py": loop, **configs})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC102", "train.py")
    assert len([line for line in out.splitlines() if ": LC102" in line]) == found


HYDRA_LOOP = KEYED_LOOP.replace('config["grad_accumulation"]', 'config["train_params"]["grad_accumulation"]').replace(
    """    if __name__ == "__main__":
        train(json.load(open(sys.argv[1])), torch.nn.Linear(4, 1), [], None)
""", """    @hydra.main(version_base=None, config_path="../conf/multiscale", config_name="conf_multiscale")
    def main(cfg):
        train(cfg, torch.nn.Linear(4, 1), [], None)
""").replace("import json", "import hydra")


@pytest.mark.parametrize(("other", "readme", "found"), [
    ("conf/t5/t5_training.json", "", 0),  # another script's configuration
    ("conf/multiscale/big.yaml", "", 1),  # one of this script's own
    ("conf/t5/t5_training.json", "python code/train.py --config-dir conf/t5\n", 1),  # Hydra pointed elsewhere
])
def test_a_hydra_script_reads_only_its_own_configuration_folder(project: Path, run_cli, other: str, readme: str,
                                                                found: int) -> None:
    # kaggle-feedback3: `@hydra.main(config_path="../conf/multiscale")`, every YAML there at 1, while
    # tools/t5_train.py's JSON sets the same key to 4
    write_project(project, {"code/train.py": HYDRA_LOOP, "tools/t5_train.py": KEYED_LOOP, "README.md": readme,
                            "conf/multiscale/conf_multiscale.yaml": "train_params:\n  grad_accumulation: 1\n",
                            other: ('{"train_params": {"grad_accumulation": 4}}\n' if other.endswith(".json")
                                    else "train_params:\n  grad_accumulation: 4\n")})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC102", "code/train.py")
    assert len([line for line in out.splitlines() if ": LC102" in line]) == found


def test_a_commented_out_value_in_a_config_is_not_shipped(project: Path, run_cli) -> None:
    commented = CONFIG.format(n=1) + "      # gradient_accumulate_every: 8\n"
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": commented})
    assert _clips(run_cli, "workspace/train.py") == []
    write_project(project, {"config/lowdim.yaml": commented.replace("# gradient", "gradient")})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


SCHEDULED_LOOP = """
    import torch
    from transformers import get_cosine_schedule_with_warmup


    def train(cfg, model, train_loader, optimizer):
        num_train_steps = int(len(train_loader) * cfg.training.epochs)
        scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=0,
                                                    num_training_steps=num_train_steps)
        for epoch in range(cfg.training.epochs):
            for step, batch in enumerate(train_loader):
                loss = model(batch).mean() / cfg.training.grad_accumulation
                loss.backward()
                if (step + 1) % cfg.training.grad_accumulation == 0:
                    optimizer.step()
                    optimizer.zero_grad()
                    scheduler.step()
"""


@pytest.mark.parametrize(("n", "found"), [(1, 0), (4, 1)])
def test_a_horizon_in_batches_stepped_per_update_where_no_config_accumulates(project: Path, run_cli, n: int,
                                                                            found: int) -> None:
    # counted in batches and stepped per optimizer step: the same count while every config sets 1
    configs = {f"config/exp{i}.yaml": f"training:\n  epochs: 5\n  grad_accumulation: {v}\n"
               for i, v in enumerate((1, n))}
    write_project(project, {"train.py": SCHEDULED_LOOP, **configs})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC303", "train.py")
    assert len([line for line in out.splitlines() if ": LC303" in line]) == found


SWITCHED_CLIP = """
    import torch


    class Trainer:
        def __init__(self, cfg, model, optimizer):
            self.cfg, self.model, self.optimizer = cfg, model, optimizer
            self.scaler = torch.cuda.amp.GradScaler()

        def train_epoch(self, loader):
            for data in loader:
                self.optimizer.zero_grad()
                with torch.autocast("cuda"):
                    loss = self.model(data).mean()
                self.scaler.scale(loss).backward()
                if self.cfg['training']['clip_grad_norm']:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
"""


@pytest.mark.parametrize(("values", "found"), [(("False", "false"), 0), (("False", "True"), 1), (("null", "1"), 1)])
def test_code_behind_a_switch_every_shipped_config_leaves_off(project: Path, run_cli, values: tuple[str, str],
                                                              found: int) -> None:
    # the clip before unscale_ runs only where `clip_grad_norm` is on: off in every config, nothing runs it
    configs = {f"configs/exp{i}.yaml": f"training:\n  use_fp16: True\n  clip_grad_norm: {v}\n"
               for i, v in enumerate(values)}
    write_project(project, {"trainer.py": SWITCHED_CLIP, **configs})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC201", "trainer.py")
    assert len([line for line in out.splitlines() if ": LC201" in line]) == found


DATACLASS_CONFIG_LOOP = """
    from dataclasses import dataclass

    import torch
    from accelerate import Accelerator


    @dataclass
    class TrainingConfig:
        gradient_accumulation_steps: int = {n}
        num_epochs: int = 10


    def train(config, model, optimizer, loader):
        accelerator = Accelerator(
            gradient_accumulation_steps=config.gradient_accumulation_steps,
        )
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for epoch in range(config.num_epochs):
            for batch in loader:
                with accelerator.accumulate(model):
                    loss = model(batch).mean()
                    accelerator.backward(loss)
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    optimizer.zero_grad()


    if __name__ == "__main__":
        train(TrainingConfig(), torch.nn.Linear(4, 1), None, [])
"""


@pytest.mark.parametrize(("n", "found"), [(1, 0), (4, 1)])
def test_a_keyword_that_hands_the_key_on_sets_nothing(project: Path, run_cli, n: int, found: int) -> None:
    # `Accelerator(gradient_accumulation_steps=config.gradient_accumulation_steps)` reads the field
    write_project(project, {"train.py": DATACLASS_CONFIG_LOOP.format(n=n)})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC107", "train.py")
    assert len([line for line in out.splitlines() if ": LC107" in line]) == found


BOTH_BRANCHES_CLIP = """
    import torch


    def train(cfg, model, optimizer, loader, scaler):
        for data in loader:
            optimizer.zero_grad()
            loss = model(data).mean()
            if cfg.train.fp16:
                scaler.scale(loss).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
"""


def test_a_switch_whose_else_does_the_same_keeps_the_finding(project: Path, run_cli) -> None:
    # a finding anchored on one branch of `if cfg.train.fp16: ... else: ...` that clips in both
    write_project(project, {"train.py": BOTH_BRANCHES_CLIP, "conf/train.yaml": "train:\n  fp16: False\n"})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC201", "train.py")
    assert len([line for line in out.splitlines() if ": LC201" in line]) == 1


THRESHOLD_CLIP = """
    import torch


    def train(cfg, model, loader, optimizer):
        for i, batch in enumerate(loader):
            loss = model(batch).mean() / cfg.grad_accumulation
            loss.backward()
            if cfg.clip_grad > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad)
            if (i + 1) % cfg.grad_accumulation == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


@pytest.mark.parametrize(("override", "found"), [("", 0), ("cfg.clip_grad = 1.0\n", 1)])
def test_a_threshold_at_zero_every_config_module_leaves_there(project: Path, run_cli, override: str,
                                                              found: int) -> None:
    # siim-covid: `if cfg.clip_grad > 0:` clips per micro-batch, but `cfg.clip_grad = 0` in the default config
    # module and no experiment config (which accumulate) sets it
    default = "from types import SimpleNamespace\ncfg = SimpleNamespace()\ncfg.clip_grad = 0\ncfg.grad_accumulation = 1\n"
    experiment = "from default_config import cfg\ncfg.grad_accumulation = 3\n" + override
    write_project(project, {"train.py": THRESHOLD_CLIP, "configs/default_config.py": default,
                            "configs/cfg_xcit.py": experiment})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC107", "train.py")
    assert len([line for line in out.splitlines() if ": LC107" in line]) == found


def test_a_switch_off_only_in_python_defaults_keeps_the_finding(project: Path, run_cli) -> None:
    # `use_fp16: bool = False` in a helper's signature says nothing about what callers turn on
    helper = "def setup(model, use_fp16: bool = False, clip_grad_norm: bool = False):\\n    return model\\n"
    write_project(project, {"trainer.py": SWITCHED_CLIP, "utils.py": helper})
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC201", "trainer.py")
    assert len([line for line in out.splitlines() if ": LC201" in line]) == 1


FOLDER_ENGINE = """
    import torch

    import config


    def train_fn(data_loader, model, optimizer):
        model.zero_grad()
        for bi, (x, y) in enumerate(data_loader):
            loss = torch.nn.functional.mse_loss(model(x), y) / config.ACCUMULATION_STEPS
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if (bi + 1) % config.ACCUMULATION_STEPS == 0:
                optimizer.step()
                model.zero_grad()
"""


@pytest.mark.parametrize(("here", "found"), [(1, 0), (2, 1)])
def test_a_setting_of_the_scripts_own_folder_module(project: Path, run_cli, here: int, found: int) -> None:
    # a Kaggle solution's folder per model (`import config`, `config.ACCUMULATION_STEPS`): the other
    # folder's `config.py` sets another script's accumulation
    write_project(project, {"models/roberta/engine.py": FOLDER_ENGINE,
                            "models/roberta/config.py": f"ACCUMULATION_STEPS = {here}\nBATCH_SIZE = 8\n",
                            "models/deberta/engine.py": FOLDER_ENGINE,
                            "models/deberta/config.py": "ACCUMULATION_STEPS = 2\nBATCH_SIZE = 4\n"})
    assert len(_clips(run_cli, "models/roberta/engine.py")) == found
    assert len(_clips(run_cli, "models/deberta/engine.py")) == 1


def test_a_setting_of_the_folder_module_that_a_script_there_changes_is_reported(project: Path, run_cli) -> None:
    write_project(project, {"models/roberta/engine.py": FOLDER_ENGINE,
                            "models/roberta/config.py": "ACCUMULATION_STEPS = 1\n",
                            "models/roberta/train.py": "import sys\n\nimport config\n\n"
                                                       "config.ACCUMULATION_STEPS = int(sys.argv[1])\n",
                            "models/deberta/config.py": "ACCUMULATION_STEPS = 2\n"})
    assert len(_clips(run_cli, "models/roberta/engine.py")) == 1


@pytest.mark.parametrize(("text", "values"), [
    (b"    gradient_accumulation_steps = cfg.gradient_accumulation_steps\n", []),  # a local reading the key
    (b"f(gradient_accumulation_steps=cfg.gradient_accumulation_steps)\n", []),
    (b"    gradient_accumulation_steps = cfg.gradient_accumulation_steps * 2\n", [None]),  # an expression
    (b"    cfg.gradient_accumulation_steps = args.gradient_accumulation_steps\n", [None]),  # an option copied in
])
def test_a_name_bound_to_the_key_it_reads_sets_nothing(text: bytes, values: list[object]) -> None:
    assert _values(text, "gradient_accumulation_steps", True) == values


OTHER_PROGRAM = """
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument('--gradient_accumulate_every', type=int, default=1, help="another program's option")
"""

LOCAL_OF_THAT_NAME = """
    def chunks(batch):
        gradient_accumulate_every = batch.shape[0] // 2
        return batch.chunk(gradient_accumulate_every)
"""


@pytest.mark.parametrize(("setting", "found"), [
    ("cfg.training.gradient_accumulate_every", 0),  # a key of the configuration tree: no option sets it
    ("args.gradient_accumulate_every", 1),  # an attribute of a flat namespace: the option may set it
    ("self.args.gradient_accumulate_every", 1),
])
def test_an_option_of_the_name_sets_no_key_of_a_configuration_tree(project: Path, run_cli, setting: str,
                                                                    found: int) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE.replace("cfg.training.gradient_accumulate_every", setting),
                            "config/lowdim.yaml": CONFIG.format(n=1), "other/options.py": OTHER_PROGRAM,
                            "other/chunks.py": LOCAL_OF_THAT_NAME})
    assert len(_clips(run_cli, "workspace/train.py")) == found


def test_a_literal_under_the_name_still_counts_for_a_key_of_a_configuration_tree(project: Path, run_cli) -> None:
    write_project(project, {"workspace/train.py": WORKSPACE, "config/lowdim.yaml": CONFIG.format(n=1),
                            "other/chunks.py": "gradient_accumulate_every = 4\n"})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


def test_an_option_copied_into_an_item_of_the_tree_is_reported(project: Path, run_cli) -> None:
    setting = 'cfg["training"]["gradient_accumulate_every"]'
    write_project(project, {"workspace/train.py": WORKSPACE.replace("cfg.training.gradient_accumulate_every", setting),
                            "config/lowdim.yaml": CONFIG.format(n=1), "other/options.py": OTHER_PROGRAM + """
    args = parser.parse_args()
    cfg["training"]["gradient_accumulate_every"] = args.gradient_accumulate_every
"""})
    assert len(_clips(run_cli, "workspace/train.py")) == 1


EXPERIMENT = """
    import argparse

    import torch
    import yaml


    def train(cfg, model, optimizer, loader):
        accumulation_steps = cfg["accumulation_steps"]
        for epoch in range(cfg["epochs"]):
            for step, (x, y) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(x), y) / accumulation_steps
                loss.backward()
                if (step + 1) % accumulation_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("-y", "--yaml_path", type=str, help="the experiment's config")
        cfg = yaml.safe_load(open(parser.parse_args().yaml_path))
        train(cfg, None, None, None)
"""


@pytest.mark.parametrize(("counts", "reported"), [
    # SIIM-RSNA 2021's experiment folders: `python exp/$exp/train.py -y exp/$exp/config.yaml`
    ({"exp001": 1, "exp002": 4, "exp003": 1}, {"exp002"}),
    ({"exp001": 1, "exp002": 1, "exp003": 1}, set()),
    # a lone folder is no series: the project's other configurations may be its own
    ({"exp001": 1}, {"exp001"}),
])
def test_an_experiment_folder_reads_its_own_configuration(project: Path, run_cli, counts: dict[str, int],
                                                          reported: set[str]) -> None:
    files = {f"exp/{name}/train.py": EXPERIMENT for name in counts}
    files |= {f"exp/{name}/config.yaml": f"epochs: 10\naccumulation_steps: {n}\n" for name, n in counts.items()}
    files["configs/big.yaml"] = "accumulation_steps: 8\n"
    write_project(project, files)
    _, out, _ = run_cli("check", "-q", "--no-show-source", "--select", "LC105", ".")
    assert {line.split("/")[1] for line in out.splitlines() if " LC105 " in line} == reported
