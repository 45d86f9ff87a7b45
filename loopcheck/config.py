"""``[tool.loopcheck]`` in ``pyproject.toml``: read, validated, and merged with the command line.

Every key is checked: an unknown key, a value of the wrong type, or an unknown rule selector is
a ``ConfigError`` that names the key, so a typo never silently disables a rule.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from loopcheck.selection import SelectorError, closest, expand

if TYPE_CHECKING:
    from types import ModuleType


def toml_parser() -> ModuleType:
    """The TOML parser, imported only where a ``pyproject.toml`` is read (a run's start-up time)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python < 3.11 only
        import tomli as tomllib
    return tomllib


class ConfigError(ValueError):
    """A configuration problem, worded for the user (the CLI prints it and exits 2)."""


@dataclass(frozen=True)
class LrScaling:
    """``[tool.loopcheck.lr-scaling]``: the batch size and learning rate a recipe was tuned for.

    With it, LC304 checks the learning rate against the effective batch (micro-batch x
    accumulation x world size) and LC305 asks for warmup when the LR is scaled up a lot."""

    reference_batch_size: int
    reference_lr: float
    rule: str = "linear"  # or "sqrt"
    warmup_threshold: float = 8.0  # LR scaled up by this factor or more needs warmup (LC305)

    def expected_lr(self, effective_batch: float) -> float:
        ratio = effective_batch / self.reference_batch_size
        return self.reference_lr * (ratio if self.rule == "linear" else ratio ** 0.5)


@dataclass(frozen=True)
class Options:
    """Per-rule settings that travel with each file to the rules (and to worker processes)."""

    lr_scaling: LrScaling | None = None
    # ``[tool.loopcheck.loss-kept-with-graph] after-backward = true``: LC601 also reports a back-propagated
    # loss kept in a sum or list made anew every epoch (host memory for its autograd nodes, no device memory)
    graphs_after_backward: bool = False


@dataclass
class Config:
    root: Path  # directory that relative patterns are resolved against
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    extend_exclude: list[str] = field(default_factory=list)
    respect_gitignore: bool = True
    source: Path | None = None  # the pyproject.toml it came from
    options: Options = field(default_factory=Options)


_LISTS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
_KEYS = (*_LISTS, "per-file-ignores", "respect-gitignore", "lr-scaling", "loss-kept-with-graph")
_GRAPH_KEYS = ("after-backward",)
_LR_KEYS = ("reference-batch-size", "reference-lr", "rule", "warmup-threshold")


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.loopcheck]`` table."""
    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "loopcheck" not in text:
                continue  # no table of ours: the TOML parser (~5% of checking one script) is not needed
            tomllib = toml_parser()
            try:
                if "loopcheck" in tomllib.loads(text).get("tool", {}):
                    return candidate
            except tomllib.TOMLDecodeError:
                if "tool.loopcheck" in text:
                    return candidate  # broken, but meant for us: `load` reports it

    return None


def load(path: Path | None, default_root: Path) -> Config:
    if path is None:
        return Config(root=default_root)
    tomllib = toml_parser()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    table = data.get("tool", {}).get("loopcheck", {})
    return parse(table, path)


def parse(table: object, path: Path) -> Config:
    where = f"{path}: [tool.loopcheck]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    config = Config(root=path.parent, source=path)
    for key, value in table.items():
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown key '{key}'{_hint(key, _KEYS)}; known keys: {', '.join(_KEYS)}")
        if key in _LISTS:
            items = _string_list(value, f"{where}.{key}")
            if key in ("select", "ignore", "extend-select"):
                _check_selectors(items, f"{where}.{key}")
            setattr(config, key.replace("-", "_"), items)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.per-file-ignores must be a table of pattern = [codes]")
            for pattern, codes in value.items():
                items = _string_list(codes, f"{where}.per-file-ignores.\"{pattern}\"")
                _check_selectors(items, f"{where}.per-file-ignores.\"{pattern}\"")
                config.per_file_ignores[pattern] = items
        elif key == "respect-gitignore":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}.respect-gitignore must be true or false, not {value!r}")
            config.respect_gitignore = value
        elif key == "lr-scaling":
            config.options = replace(config.options, lr_scaling=_lr_scaling(value, f"{where}.lr-scaling"))
        elif key == "loss-kept-with-graph":
            config.options = replace(config.options,
                                     graphs_after_backward=_graph_settings(value, f"{where}.loss-kept-with-graph"))
    return config


def _graph_settings(value: object, where: str) -> bool:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table")
    for key in value:
        if key not in _GRAPH_KEYS:
            raise ConfigError(f"{where}: unknown key '{key}'{_hint(key, _GRAPH_KEYS)}; known keys: "
                              f"{', '.join(_GRAPH_KEYS)}")
    after = value.get("after-backward", False)
    if not isinstance(after, bool):
        raise ConfigError(f"{where}.after-backward must be true or false, not {after!r}")
    return after


def _lr_scaling(value: object, where: str) -> LrScaling:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table")
    for key in value:
        if key not in _LR_KEYS:
            raise ConfigError(f"{where}: unknown key '{key}'{_hint(key, _LR_KEYS)}; known keys: {', '.join(_LR_KEYS)}")
    for key in ("reference-batch-size", "reference-lr"):
        if key not in value:
            raise ConfigError(f"{where}.{key} is required")
    batch, lr = value["reference-batch-size"], value["reference-lr"]
    if not isinstance(batch, int) or isinstance(batch, bool) or batch <= 0:
        raise ConfigError(f"{where}.reference-batch-size must be a positive integer, not {batch!r}")
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or lr <= 0:
        raise ConfigError(f"{where}.reference-lr must be a positive number, not {lr!r}")
    rule = value.get("rule", "linear")
    if rule not in ("linear", "sqrt"):
        raise ConfigError(f"{where}.rule must be \"linear\" or \"sqrt\", not {rule!r}")
    threshold = value.get("warmup-threshold", 8.0)
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or threshold <= 1:
        raise ConfigError(f"{where}.warmup-threshold must be a number above 1, not {threshold!r}")
    return LrScaling(batch, float(lr), rule, float(threshold))


def _hint(key: str, known: tuple[str, ...]) -> str:
    match = closest(key.replace("_", "-").lower(), known)
    return f" (did you mean '{match}'?)" if match else ""


def _string_list(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings, not {value!r}")
    return list(value)


def _check_selectors(items: list[str], where: str) -> None:
    for item in items:
        try:
            expand(item)
        except SelectorError as error:
            raise ConfigError(f"{where}: {error}") from None
