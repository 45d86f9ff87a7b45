"""LC105 and a data loop whose function the file runs once from module level."""

from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

FIXTURE = Path(__file__).parent / "fixtures" / "must_not_flag" / "single_pass_main_bounded_by_updates.py"
CALL = '    print("updates:", main(parser.parse_args()))\n'


def test_a_function_called_once_from_module_level_is_one_pass() -> None:
    assert [f.code for f in check_source(FIXTURE.read_text(), select=["LC105"])] == []


def test_a_function_called_per_epoch_or_from_elsewhere_still_leaves_a_window() -> None:
    source = FIXTURE.read_text()
    assert CALL in source
    per_epoch = source.replace(CALL, "    for epoch in range(3):\n    " + CALL)
    not_called = source.replace(CALL, "    pass\n")
    for variant in (per_epoch, not_called):
        assert [f.code for f in check_source(variant, select=["LC105"])] == ["LC105"]
