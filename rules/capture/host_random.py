"""GL509: Python randomness or a clock read inside the captured region whose value reaches the
device: the capture freezes the value drawn at capture time (capture-only)."""
from __future__ import annotations

import re

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import code_children
from graphlint.analysis.inference.lattice import DEVICE
from graphlint.analysis.walk.rule import Context, Example, Rule

_RANDOM_AND_CLOCK = re.compile(
    r"^(random\.\w+|numpy\.random\.\w+|time\.(time|time_ns|perf_counter|perf_counter_ns|monotonic|monotonic_ns"
    r"|process_time|process_time_ns)|datetime\.datetime\.(now|utcnow|today)|datetime\.date\.today"
    r"|os\.urandom|secrets\.\w+|uuid\.uuid[14])$")
_TORCH = catalog.prefix("namespaces", "torch")
_CUDA = catalog.prefix("namespaces", "cuda")


class HostRandomOrClock(Rule):
    """Flags Python randomness and wall-clock reads inside the captured region whose value reaches the device.

    `random.*`, `numpy.random.*`, `time.time`, `time.perf_counter`, `datetime.now`, when the
    value (directly or through local names) is an argument of a torch op or a tensor method,
    an operand next to a tensor, an index of a tensor or a branch condition. Timing code
    around a step (`t0 = time.perf_counter()` ... logged) is not a hazard.

    ## Why it breaks a CUDA graph
    The host value is computed once, at capture, and baked into the kernels as a constant:
    every replay reuses the same "random" draw or timestamp. Eagerly it changes every step,
    so graphs-on and graphs-off silently diverge.

    ## Example
        keep = random.random() > p
        noise = np.random.randn(*x.shape)

    ## Use instead
    Draw on the device with a generator the graph can replay (`torch.rand(..., device=d,
    generator=g)`, registered with the graph), and time steps with CUDA events outside the
    step.
    """

    code = "GL509"
    name = "host-random-or-clock"
    message = "Python randomness or a clock read inside the captured region: the capture freezes the value for every replay"
    fix = "draw random numbers on the device (torch.rand(..., generator=g)); time with CUDA events outside the step"
    capture_only = True
    VALID = [
        "def step(x: torch.Tensor, gen: torch.Generator):\n    return x * torch.rand(x.shape, device=x.device, generator=gen)\n",
        "def bench(fn):  # graphlint: host\n    t0 = time.perf_counter()\n    fn()\n    return time.perf_counter() - t0\n",
        # Timing around a step, in per-step code: the clock never reaches a kernel.
        "import time\ndef forward(self, x: torch.Tensor):\n    t0 = time.perf_counter()\n    y = self.layer(x)\n"
        "    self.stats.append(time.perf_counter() - t0)\n    return y\n",
        "import time\ndef step(self, x: torch.Tensor):\n    start = time.time()\n    out = x * 2\n"
        "    logger.info('step took %.3f', time.time() - start)\n    return out\n",
        # LayerDrop: the draw decides a branch only while training (a decode step runs in eval mode).
        "import random\ndef forward(self, x: torch.Tensor):\n    for layer in self.layers:\n"
        "        p = random.uniform(0, 1)\n        if self.training and (p < self.layerdrop):\n            continue\n"
        "        x = layer(x)\n    return x\n",
    ]
    INVALID = [
        "import random\ndef step(x: torch.Tensor, p: float):\n    if random.random() > p:\n        return x\n    return x * 0\n",
        # Not conjoined with the training flag: the branch is frozen in eval mode too.
        "import random\ndef forward(self, x: torch.Tensor):\n    p = random.uniform(0, 1)\n"
        "    if self.enabled and p < self.rate:\n        return x\n    return x * 0\n",
        "import numpy as np\ndef step(x: torch.Tensor):\n    return x + torch.from_numpy(np.random.randn(4)).to(x.device)\n",
        Example("import time\nimport random\ndef step(x: torch.Tensor):\n    t = time.time()\n"
                "    x = x + t\n    k = random.randint(0, 3)\n    j = k + 1\n    return x[:, j]\n", 2),
    ]

    def visit_Call(self, node: cst.Call, ctx: Context) -> None:
        qualified = ctx.qualified(node.func)
        if qualified is not None and _RANDOM_AND_CLOCK.match(qualified) and _reaches_device(node, ctx):
            ctx.report(self, node, message=f"`{qualified}` inside the captured region: the capture freezes its value")


def _device_use(chain: list[cst.CSTNode], ctx: Context) -> tuple[bool, list[str]]:
    """Walk from a value up through its parents (nearest first, up to its statement): whether
    it becomes a device op's argument, an operand next to a device value, an index of a device
    tensor or a branch condition; else the local names it is assigned to."""
    child: cst.CSTNode | None = None
    for parent in chain:
        if isinstance(parent, cst.Call) and child is not parent.func:
            qualified = ctx.qualified(parent.func)
            if qualified is not None and qualified.startswith(_TORCH) and not qualified.startswith(_CUDA):
                return True, []
            if isinstance(parent.func, cst.Attribute) and ctx.value(parent.func.value).kind == DEVICE:
                return True, []
            if qualified is not None or not isinstance(parent.func, cst.Attribute):
                pass  # a host call (print, min, a helper): its result may still flow on
        elif isinstance(parent, cst.BinaryOperation):
            other = parent.right if child is parent.left else parent.left
            if ctx.value(other).kind == DEVICE:
                return True, []
        elif isinstance(parent, cst.Subscript) and child is not parent.value:
            if ctx.value(parent.value).kind == DEVICE:
                return True, []
        elif isinstance(parent, (cst.If, cst.While)) and child is parent.test:
            return True, []  # which kernels are captured is decided once, at capture
        elif isinstance(parent, cst.IfExp) and child is parent.test:
            return True, []
        elif (isinstance(parent, cst.BooleanOperation) and isinstance(parent.operator, cst.And)
              and child is parent.right and _is_training_flag(parent.left)):
            return False, []  # `self.training and p < self.layerdrop`: read only while training
        elif isinstance(parent, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            names = []
            for target in targets:
                parts = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
                names.extend(p.value for p in parts if isinstance(p, cst.Name))
            return False, names
        elif isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
            return False, []
        child = parent
    return False, []


def _is_training_flag(node: cst.BaseExpression) -> bool:
    """`self.training` (nn.Module's train/eval flag): a decode step is captured in eval mode."""
    return isinstance(node, cst.Attribute) and node.attr.value == "training"


def _reaches_device(node: cst.Call, ctx: Context) -> bool:
    """Whether a host random draw or clock read reaches the device or a branch, directly or
    through local names (two assignments deep); timing code around a step does not."""
    used, names = _device_use(list(reversed(ctx.parents)), ctx)
    if used:
        return True
    function = ctx.parents[0] if ctx.parents and isinstance(ctx.parents[0], cst.FunctionDef) else None
    if function is None or not names:
        return False
    tainted = set(names)
    for _ in range(2):
        grown = False
        stack: list[tuple[cst.CSTNode, tuple]] = [(function.body, ())]
        while stack:
            current, ancestors = stack.pop()
            if isinstance(current, cst.Name) and current.value in tainted and ancestors:
                used, more = _device_use(list(reversed(ancestors)), ctx)
                if used:
                    return True
                if set(more) - tainted:
                    tainted |= set(more)
                    grown = True
                continue
            if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            below = ancestors + (current,)
            stack.extend((c, below) for c in code_children(current))
        if not grown:
            break
    return False


RULES = [HostRandomOrClock]
