#!/usr/bin/env python3
"""Run the client's unittest suite and report one line per test:
"ok - NAME", "ok - NAME # SKIP why" or "not ok - NAME", then "N passed,
N failed" (skips count as passed, and are counted on a line of their own).
Exit 0 when nothing failed. Used by tests/integration/it_pyclient.sh."""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Result(unittest.TestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.passed = 0
        self.failed = 0
        self.skips = 0

    @staticmethod
    def _name(test):
        case = getattr(test, "test_case", None)       # a subTest
        if case is not None:
            return "%s.%s %s" % (type(case).__name__, case._testMethodName,
                                 test._subDescription())
        return "%s.%s" % (type(test).__name__, test._testMethodName)

    def _report(self, test, ok, note=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print("%s - %s%s" % ("ok" if ok else "not ok", self._name(test), note), flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._report(test, True)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.skips += 1
        self._report(test, True, " # SKIP " + reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._report(test, True)

    def _fail(self, test, err):
        self._report(test, False)
        for line in self._exc_info_to_string(err, test).rstrip().splitlines():
            print("#   " + line)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        if isinstance(test, unittest.TestCase):
            self._fail(test, err)
        else:       # a class or module fixture
            self.failed += 1
            print("not ok - %s" % test)
            for line in self._exc_info_to_string(err, None).rstrip().splitlines():
                print("#   " + line)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._report(test, False, " (unexpected success)")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._fail(subtest, err)


def main():
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    result = Result()
    suite.run(result)
    if result.skips:
        print("# %d skipped" % result.skips)
    print("%d passed, %d failed" % (result.passed, result.failed))
    return 1 if result.failed or not result.passed else 0


if __name__ == "__main__":
    sys.exit(main())
