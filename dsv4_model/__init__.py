"""A tiny, seeded, randomly initialised DeepSeek-V4-style decoder: the bundled runtime target.

`GraphSafeDSV4` is the default decode step, capturable whole by one CUDA graph;
`ReferenceDSV4` is the eager port that serves as its oracle and as the known-bad target.
"""
from .config import DSV4Config, make_config
from .model import GraphSafeDSV4
from .reference import ReferenceDSV4
from .weights import DSV4Weights

__all__ = ["DSV4Config", "DSV4Weights", "GraphSafeDSV4", "ReferenceDSV4", "make_config"]
