"""LC103 in pytest files: silent in tests and in helpers only tests call, not elsewhere."""
from __future__ import annotations

from pathlib import Path

from loopcheck.engine import check_source

ROOT = Path(__file__).resolve().parent.parent
HELPER = (ROOT / "rules" / "fixtures" / "LC103" / "helper_of_a_training_script_also_called_by_main.py").read_text()
TEST_ONLY = HELPER.split('if __name__ == "__main__":')[0]


def _lc103(source: str, filename: str) -> int:
    return sum(f.code == "LC103" for f in check_source(source, filename=filename, select=["LC103"]))


def test_helper_called_only_by_tests_of_a_pytest_file_is_silent():
    assert _lc103(TEST_ONLY, "tests/test_fit.py") == 0
    assert _lc103(TEST_ONLY, "fit_test.py") == 0


def test_helper_also_called_by_main_is_flagged_even_in_a_pytest_file():
    assert _lc103(HELPER, "tests/test_fit.py") == 1


def test_the_same_code_outside_a_pytest_file_is_flagged():
    assert _lc103(TEST_ONLY, "train.py") == 1
    assert _lc103(TEST_ONLY.replace("def test_fit", "def check_fit"), "tests/test_fit.py") == 1


MODES = (ROOT / "tests" / "fixtures" / "must_not_flag" / "pytest_test_evaluates_two_modules_between_steps.py").read_text()


def _lc605(source: str, filename: str) -> int:
    return sum(f.code == "LC605" for f in check_source(source, filename=filename, select=["LC605"]))


def test_eval_mode_in_a_pytest_test_is_silent_and_flagged_in_a_script():
    assert _lc605(MODES, "tests/test_deferred_batch_norm.py") == 0
    assert _lc605(MODES, "train.py") == 2
    assert _lc605(MODES.replace("def test_optimize", "def check_optimize"), "tests/test_deferred_batch_norm.py") == 2


UNITTEST = '''
import unittest

import torch


class NumericTestCase(unittest.TestCase):
    def testNumericBatchNorm(self):
        bn1, bn2 = torch.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)
        opt1 = torch.optim.SGD(bn1.parameters(), lr=0.01)
        opt2 = torch.optim.SGD(bn2.parameters(), lr=0.01)
        for _ in range(100):
            x = torch.rand(2, 4, 3, 3)
            bn1(x).sum().backward()
            opt1.step()
            bn2(x).sum().backward()
            opt2.step()
        self.assertTrue(torch.allclose(bn1.weight.grad, bn2.weight.grad))
'''


def test_a_unittest_method_in_a_test_file_is_silent():
    assert _lc103(UNITTEST, "tests/test_numeric_batchnorm.py") == 0
    assert _lc103(UNITTEST, "train.py") == 2
    # `test` followed by a lower-case letter is no unittest method name (`tester`, `testing`)
    assert _lc103(UNITTEST.replace("testNumericBatchNorm", "testing"), "tests/test_numeric_batchnorm.py") == 2
