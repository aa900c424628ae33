"""Runtime harness tests run from the repository root: report paths are relative to it."""
from __future__ import annotations

import pytest

from runtime_helpers import REPO


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    monkeypatch.chdir(REPO)
