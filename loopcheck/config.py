"""``[tool.loopcheck]`` in ``pyproject.toml``: read, validated, and merged with the command line.

Every key is checked: an unknown key, a value of the wrong type, or an unknown rule selector is
a ``ConfigError`` that names the key, so a typo never silently disables a rule.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from loopcheck.selection import SelectorError, expand

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib


class ConfigError(ValueError):
    """A configuration problem, worded for the user (the CLI prints it and exits 2)."""


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


_LISTS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
_KEYS = (*_LISTS, "per-file-ignores", "respect-gitignore")


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.loopcheck]`` table."""
    for directory in [start, *start.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
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
            hint = f" (did you mean '{key.replace('_', '-')}'?)" if key.replace("_", "-") in _KEYS else ""
            raise ConfigError(f"{where}: unknown key '{key}'{hint}; known keys: {', '.join(_KEYS)}")
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
    return config


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
