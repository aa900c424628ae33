"""The guardrail: branching on host-known values is never flagged (a false alarm here costs
more trust than a miss). Each snippet is the issue's list, in a realistic forward."""
from __future__ import annotations

import pytest

from graphlint.testing import lint_snippet

HOST_KNOWN = {
    "shape": "def f(x: torch.Tensor):\n    if x.shape[0] > 1:\n        x = x * 2\n    return x\n",
    "numel": "def f(x: torch.Tensor):\n    if x.numel() == 0:\n        return x\n    return x + 1\n",
    "dtype": "def f(x: torch.Tensor):\n    if x.dtype == torch.bfloat16:\n        x = x.float()\n    return x\n",
    "training": "class M(nn.Module):\n    def forward(self, x: torch.Tensor):\n        if self.training:\n            x = F.dropout(x, 0.1)\n        return x\n",
    "step_int": "def f(x: torch.Tensor, step: int):\n    if step % 4 == 3:\n        x = x * 0.5\n    return x\n",
    "is_none": "def f(x: torch.Tensor, mask=None):\n    if mask is None:\n        return x\n    return x + mask\n",
    "isinstance": "def f(x):\n    if isinstance(x, torch.Tensor):\n        return x.float()\n    return x\n",
    "is_cuda": "def f(x: torch.Tensor):\n    if x.is_cuda:\n        return x\n    return x.cuda()\n",
    "range_size": "def f(x: torch.Tensor):\n    out = x\n    for i in range(x.size(0)):\n        out = out + x[i]\n    return out\n",
    "item_then_compare": "def f(x: torch.Tensor):\n    v = x.max().item()\n    if v > 1e4:\n        return x * 0.5\n    return x\n",
    "size_unpack": "def f(hidden_states: torch.Tensor):\n    bsz, q_len, _ = hidden_states.size()\n    if q_len > 1:\n        return hidden_states[:, -1]\n    return hidden_states\n",
    "config_flag": "class M(nn.Module):\n    def __init__(self, config):\n        super().__init__()\n        self.use_cache = config.use_cache\n    def forward(self, x: torch.Tensor):\n        if self.use_cache and x.dim() == 3:\n            return x\n        return x\n",
    "len_and_dim": "def f(xs: list, x: torch.Tensor):\n    while len(xs) < x.dim():\n        xs.append(1)\n    return xs\n",
    "device_type": "def f(x: torch.Tensor):\n    if x.device.type == 'cuda' and x.is_contiguous():\n        return x\n    return x.contiguous()\n",
    "ternary_on_flag": "def f(x: torch.Tensor, causal: bool):\n    return x.tril() if causal else x\n",
    "assert_shape": "def f(x: torch.Tensor, w: torch.Tensor):\n    assert x.shape[-1] == w.shape[0], 'bad shape'\n    return x @ w\n",
    "optional_tensor_test": "def f(x: torch.Tensor, bias: torch.Tensor | None = None):\n    if bias is not None:\n        x = x + bias\n    return x\n",
    "compiling": "def f(x: torch.Tensor):\n    if torch.compiler.is_compiling() or torch.jit.is_tracing():\n        return x\n    return x + 0\n",
}


@pytest.mark.parametrize("name", sorted(HOST_KNOWN))
def test_host_known_branch_is_not_flagged(name):
    found = [f for f in lint_snippet(HOST_KNOWN[name]) if f.family == "host-control-flow"]
    assert found == [], f"{name}: {found}"


def test_the_item_is_the_finding_not_the_if():
    found = lint_snippet(HOST_KNOWN["item_then_compare"])
    assert [f.rule for f in found] == ["GL101"]
