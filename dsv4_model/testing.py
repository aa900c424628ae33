"""Pytest helpers for the model's own tests (tests/test_dsv4_*.py).

The model's steps are thousands of tiny ops: on a small, busy CPU, torch's intra-op threads
fight each other and one step can take twenty times longer than on one thread.
"""
from __future__ import annotations

import pytest
import torch

from .factory import forced_tokens


@pytest.fixture(autouse=True)
def one_torch_thread():  # graphlint: host
    """Run each test with one intra-op thread, then restore the previous count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def prompts(batch: int, length: int = 8, seed: int = 1, vocab: int = 1024) -> torch.Tensor:  # graphlint: host
    """[batch, length] deterministic prompt tokens."""
    return forced_tokens(vocab, length, batch, seed).T.contiguous()
