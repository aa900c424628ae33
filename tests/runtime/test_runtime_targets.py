"""Target specs, options and load failures (the exit-code-2 cases)."""
from __future__ import annotations

import pytest

from graphlint.runtime.targets import loader
from graphlint.runtime.harness import resolve_devices
from graphlint.runtime.targets.loader import TargetError, UsageError

from runtime_helpers import target


def test_shorthands_and_default():
    assert loader.resolve_spec(None) == "dsv4_model.target:graph_safe"
    assert loader.resolve_spec("reference") == "dsv4_model.target:reference"
    assert loader.resolve_spec("graph-safe") == "dsv4_model.target:graph_safe"
    assert loader.resolve_spec("pkg.mod:make") == "pkg.mod:make"


def test_bundled_targets_get_the_tiny_options():
    assert loader.default_options("dsv4_model.target:reference") == {"config": "tiny", "batch": 1, "seed": 0}
    assert loader.default_options("mypkg:make") == {}


@pytest.mark.parametrize("text, expected", [
    ("size=16", ("size", 16)),
    ("scale=0.5", ("scale", 0.5)),
    ("flag=true", ("flag", True)),
    ("config=tiny", ("config", "tiny")),
    ("opt=none", ("opt", None)),
])
def test_options_are_parsed(text, expected):
    assert loader.parse_option(text) == expected


@pytest.mark.parametrize("text", ["size", "=3", "two words=1"])
def test_bad_options_are_usage_errors(text):
    with pytest.raises(UsageError):
        loader.parse_option(text)


@pytest.mark.parametrize("spec, message", [
    ("nosuchmodule_graphlint:make", "cannot import target module"),
    ("tests/runtime/targets/broken_import.py:make", "importing"),
    ("tests/runtime/targets/missing.py:make", "does not exist"),
    ("tests/runtime/targets/clean.py:nope", "has no attribute"),
    ("justaname", "not module:callable"),
])
def test_load_failures_are_target_errors(spec, message):
    with pytest.raises(TargetError, match=message):
        loader.load_factory(loader.resolve_spec(spec))


def test_file_target_builds_and_follows_the_protocol():
    factory = loader.load_factory(target("clean"))
    import torch

    obj = loader.build(factory, torch.device("cpu"), {"size": 4})
    assert obj.x.shape == (4,)
    with pytest.raises(TargetError, match="--option"):
        loader.build(factory, torch.device("cpu"), {"no_such_option": 1})


def test_device_resolution():
    assert resolve_devices(None, 0) == ["cpu"]
    assert resolve_devices(None, 2) == ["cuda:0"]
    assert resolve_devices("all", 2) == ["cuda:0", "cuda:1"]
    assert resolve_devices("all", 0) == ["cpu"]
    assert resolve_devices("cuda:0,cuda:1,cuda:1", 2) == ["cuda:0", "cuda:1"]
    assert resolve_devices("cuda", 1) == ["cuda:0"]
    for bad, count in (("cuda:0", 0), ("cuda:3", 2), ("tpu", 1), ("cpu,cuda:0", 1)):
        with pytest.raises(UsageError):
            resolve_devices(bad, count)
