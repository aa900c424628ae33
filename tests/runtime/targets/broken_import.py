"""A target module that cannot be imported."""
import graphlint_no_such_module  # noqa: F401


def make(device):
    raise AssertionError("unreachable")
