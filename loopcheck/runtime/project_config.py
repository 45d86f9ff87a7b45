"""The project's ``[tool.loopcheck]`` table, read with the static checker's own loader
(nearest ``pyproject.toml`` at or above the working directory, as ``loopcheck check`` does):
its ``select``/``ignore``/``extend-select`` are the defaults that the command line overrides
(``--select`` replaces, ``--ignore`` adds), and ``lr-scaling`` feeds LC304/LC305."""
from __future__ import annotations

from pathlib import Path

from loopcheck.config import Config, find_pyproject, load

from .selection import Selection, split_selectors


def project_config(start: Path | None = None) -> Config:
    """Raises ``loopcheck.config.ConfigError`` (a ``ValueError``) for a broken table."""
    start = start or Path.cwd()
    return load(find_pyproject(start), start)


def selection_for(config: Config, select: list[str] | None, ignore: list[str] | None) -> Selection:
    cli_select = split_selectors(select)
    return Selection.parse(cli_select if cli_select is not None else config.select,
                           [*config.ignore, *(split_selectors(ignore) or [])],
                           config.extend_select if cli_select is None else None)
