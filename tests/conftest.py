"""Test-suite wide: without torch (the Pythons of .ci/run that have no local torch build), a
test module that imports torch is reported as skipped with the reason, not as a collection
error, and so is every test under tests/runtime/ (the harness runs torch). Fixture projects are
inputs to tests, not tests."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None
# tests/fixtures/plugin_project/tests is the test suite of a user's project; tests/test_pytest_plugin.py
# runs it in its own pytest process.
collect_ignore = ["fixtures"]

_NEEDS_TORCH = "torch is not installed for this Python (the local CPU build is for the default one)"


class _TorchOptionalModule(pytest.Module):
    def _getobj(self):
        try:
            return super()._getobj()
        except pytest.Collector.CollectError as error:
            if not HAVE_TORCH and "No module named 'torch'" in str(error):
                raise pytest.skip.Exception(_NEEDS_TORCH, allow_module_level=True) from None
            raise


def pytest_pycollect_makemodule(module_path: Path, parent):
    if HAVE_TORCH:
        return None
    return _TorchOptionalModule.from_parent(parent, path=module_path)


def pytest_collection_modifyitems(config, items):
    if HAVE_TORCH:
        return
    runtime = Path(__file__).parent / "runtime"
    for item in items:
        if runtime in Path(item.fspath).parents:
            item.add_marker(pytest.mark.skip(reason=_NEEDS_TORCH))
