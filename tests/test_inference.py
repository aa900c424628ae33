"""Device-value inference on small functions: what each name holds after the body runs."""
from __future__ import annotations

import libcst as cst
import pytest

from graphlint.analysis.inference.class_facts import collect_class
from graphlint.analysis.inference.facts import ModuleFacts
from graphlint.analysis.inference.function_walk import Inference
from graphlint.analysis.inference.lattice import DEVICE, HOST, HOST_TENSOR, MODULE, UNKNOWN
from graphlint.analysis.names import collect_imports


def kinds(code: str, function: str = "f", class_name: str | None = None) -> dict[str, str]:
    module = cst.parse_module("import torch\nfrom torch import nn\n" + code)
    facts = ModuleFacts(module, collect_imports(module))
    target = None
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef):
            collect_class(stmt, facts)
            if stmt.name.value == class_name:
                target = next(s for s in stmt.body.body if isinstance(s, cst.FunctionDef) and s.name.value == function)
        elif isinstance(stmt, cst.FunctionDef) and stmt.name.value == function:
            target = stmt
    inference = Inference(facts, class_name)
    inference.run_function(target, is_method=class_name is not None)
    return {name: value.kind for name, value in inference.env.items()}


@pytest.mark.parametrize("code,name,kind", [
    ("def f(x: torch.Tensor):\n    n = x.shape[0]\n", "n", HOST),
    ("def f(x: torch.Tensor):\n    m = x > 0\n", "m", DEVICE),
    ("def f(x: torch.Tensor):\n    v = x.max().item()\n", "v", HOST),
    ("def f(x: torch.Tensor):\n    h = x.cpu()\n", "h", HOST_TENSOR),
    ("def f(x: torch.Tensor, dev):\n    h = torch.zeros(3, device='cpu')\n    d = h.to(dev)\n", "d", DEVICE),
    ("def f(x: torch.Tensor):\n    p = torch.zeros(3, pin_memory=True)\n", "p", HOST_TENSOR),
    ("def f(x):\n    y = x.view(-1)\n", "x", DEVICE),  # used as a tensor: evidence
    ("def f(x):\n    y = x + 1\n", "x", UNKNOWN),
    ("def f(path: str):\n    sd = torch.load(path, map_location='cuda')\n", "sd", UNKNOWN),
    ("def f(a: int):\n    h = torch.cat([torch.arange(a), torch.arange(a)])\n", "h", HOST_TENSOR),
    ("def f(x: torch.Tensor):\n    b, s, d = x.size()\n", "s", HOST),
    ("def f(x: torch.Tensor):\n    xs = []\n", "xs", UNKNOWN),
    # A declaration wins over its None placeholder: the name holds a tensor once set.
    ("from typing import Optional\ndef f():\n    c: Optional[torch.Tensor] = None\n", "c", DEVICE),
    ("from typing import Optional\ndef f():\n    n: Optional[int] = None\n", "n", HOST),
    # numpy arrays are host memory; a tag stored on a parameter is not a tensor.
    ("import numpy as np\ndef f(n: int):\n    rows = np.arange(n)\n", "rows", HOST_TENSOR),
    ("def f(p: torch.nn.Parameter):\n    t = p._weight_type\n    w = p.data\n", "t", UNKNOWN),
    ("def f(p: torch.nn.Parameter):\n    t = p._weight_type\n    w = p.data\n", "w", DEVICE),
])
def test_kinds(code, name, kind):
    assert kinds(code)[name] == kind


def test_class_attributes_from_init():
    code = (
        "class M(nn.Module):\n"
        "    def __init__(self, n, dev):\n"
        "        super().__init__()\n"
        "        self.register_buffer('buf', torch.zeros(n))\n"
        "        self.w = nn.Parameter(torch.randn(n))\n"
        "        self.b = nn.Buffer(torch.zeros(n))\n"
        "        self.pinned = torch.zeros(n, pin_memory=True)\n"
        "        self.lin = nn.Linear(n, n)\n"
        "    def f(self, x: torch.Tensor):\n"
        "        a = self.buf\n        w = self.w\n        b = self.b\n        p = self.pinned\n        y = self.lin(x)\n"
    )
    found = kinds(code, "f", "M")
    assert (found["a"], found["w"], found["b"], found["p"], found["y"]) == (DEVICE, DEVICE, DEVICE, HOST_TENSOR, DEVICE)


def test_loops_bind_modules_and_host_indices():
    code = (
        "class M(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = nn.ModuleList([nn.Linear(2, 2)])\n"
        "    def f(self, x: torch.Tensor):\n"
        "        for i, layer in enumerate(self.layers):\n"
        "            x = layer(x)\n"
    )
    found = kinds(code, "f", "M")
    assert (found["i"], found["layer"], found["x"]) == (HOST, MODULE, DEVICE)


def _run(code: str) -> Inference:
    module = cst.parse_module("import torch\n" + code)
    facts = ModuleFacts(module, collect_imports(module))
    target = next(s for s in module.body if isinstance(s, cst.FunctionDef))
    inference = Inference(facts, None)
    inference.run_function(target, is_method=False)
    return inference


@pytest.mark.parametrize("changes", [False, True])
def test_nested_loops_are_linear(changes):
    # 24 nested `for` loops: walking each body twice per level visited 2**24 statements. The
    # innermost body may change a name the outer loops carry (`changes`): each loop still
    # settles after a bounded number of walks of its own body.
    depth = 24
    lines = ["def f(x: torch.Tensor, n: int):", "    acc = None"]
    for level in range(depth):
        lines.append("    " * (level + 1) + f"for i{level} in range(n):")
    lines.append("    " * (depth + 1) + ("acc = x.sum()" if changes else "pass"))
    inference = _run("\n".join(lines) + "\n")
    statements = depth + 2
    assert inference.visits <= 6 * statements
    assert inference.env["acc"].kind == (DEVICE if changes else "none")


def test_loop_carried_device_value_reaches_the_test():
    code = ("def f(x: torch.Tensor, tol: float):\n"
            "    done = False\n"
            "    while not done:\n"
            "        x = x * 0.5\n"
            "        done = (x.abs() < tol).all()\n")
    module = cst.parse_module("import torch\n" + code)
    facts = ModuleFacts(module, collect_imports(module))
    function = module.body[-1]
    inference = Inference(facts, None)
    inference.run_function(function, is_method=False)
    loop = function.body.body[1]
    # `not done` tests a device bool from the second iteration on.
    assert inference.out.of(loop.test.expression).kind == DEVICE
    assert inference.env["done"].kind == DEVICE


def test_loop_carried_host_value_stays_host():
    code = ("def f(x: torch.Tensor, n: int):\n"
            "    pos = 0\n"
            "    for _ in range(n):\n"
            "        pos = pos + x.shape[0]\n"
            "    return pos\n")
    assert _run(code).env["pos"].kind == HOST
