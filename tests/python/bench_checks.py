"""What the tests of bench/'s scripts share: bench/ on the import path (the scripts are imported
as modules), the repository's root, and checks that collect their failures for one report."""

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))

failures = []


def check(condition, what):
    """Records `what` as a failure unless `condition` holds."""
    if not condition:
        failures.append(what)


def finish(passed):
    """Prints the failures and exits 1, or prints `passed` and exits 0."""
    if failures:
        print("\n".join(f"FAIL: {failure}" for failure in failures))
        sys.exit(1)
    print(passed)
    sys.exit(0)
