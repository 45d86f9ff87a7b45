"""The compiled dataclass methods kept between runs: the same classes, the compiler skipped."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from loopcheck import dataclass_code


def _define() -> type:
    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int = 2

    return Point


def test_a_second_definition_reads_the_code_instead_of_compiling(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with dataclass_code.cached(tmp_path):
        first = _define()
    assert dataclass_code.path(tmp_path).is_file()
    assert not hasattr(dataclasses, "exec")  # the hook is gone afterwards

    def no_compiler(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(dataclass_code, "compile", no_compiler, raising=False)
    with dataclass_code.cached(tmp_path):
        second = _define()
    assert second(1) == second(1, 2) and second(1) != second(3)
    assert repr(second(1)) == repr(first(1)).replace(first.__qualname__, second.__qualname__)
    with pytest.raises(dataclasses.FrozenInstanceError):
        second(1).x = 5  # type: ignore[misc]


def test_a_corrupt_or_unwritable_file_only_costs_the_compiling(tmp_path: Path) -> None:
    dataclass_code.path(tmp_path).write_bytes(b"\x00not marshal")
    with dataclass_code.cached(tmp_path):
        assert _define()(1).y == 2
    blocked = tmp_path / "file"
    blocked.write_text("")
    with dataclass_code.cached(blocked / "below"):  # a directory that cannot be made
        assert _define()(1).y == 2


def _define_other() -> type:
    @dataclasses.dataclass(frozen=True)
    class Segment:
        start: int
        end: int
        label: str = ""

    return Segment


def test_two_versions_run_in_turn_compile_once_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with dataclass_code.cached(tmp_path):  # one copy of loopcheck
        _define()
    with dataclass_code.cached(tmp_path):  # another, with other dataclasses
        _define_other()

    def no_compiler(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(dataclass_code, "compile", no_compiler, raising=False)
    with dataclass_code.cached(tmp_path):  # the first again: its code is still kept
        assert _define()(1).y == 2
    with dataclass_code.cached(tmp_path):
        assert _define_other()(1, 2).label == ""
