"""GL511: a branch on a per-step Python scalar inside the captured region: the capture records
the branch taken at capture time, and every replay takes it again (capture-only)."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis.inference.lattice import DEVICE, HOST_TENSOR
from graphlint.analysis.walk.rule import Context, Rule
from .per_step import mentions, per_step_names


class PerStepBranch(Rule):
    """Flags `if`/`elif`/`while` and conditional expressions inside the captured region whose
    test is a per-step Python scalar (a decode position or counter, as GL508 recognises them).

    ## Why it breaks a CUDA graph
    The test is evaluated once, on the host, at capture: the graph holds the branch taken then
    and replays it at every step. The reference port's compressor boundary (`if (start_pos + 1) % ratio
    == 0: compress()`) then compresses at every replay or never; no error is raised.

    ## Example
        should_compress = (start_pos + 1) % ratio == 0
        if should_compress:
            kv_all = torch.cat([...])

    ## Use instead
    Run the branch's work every step and select its effect with a device mask or position
    (`torch.where(pos % ratio == ratio - 1, new, old)`, a write into slot `pos // ratio` that is
    masked until the boundary), or capture one graph per branch and pick the graph on the host.

    ## Known problems
    Per-step values are recognised by name, as in GL508. A branch on a host-known flag or on a
    shape is never flagged.
    """

    code = "GL511"
    name = "per-step-branch"
    message = "a branch on a per-step Python scalar inside the captured region: the capture freezes the branch it took"
    fix = "compute both paths and select with a device mask (torch.where on a device position), or capture one graph per branch"
    capture_only = True
    VALID = [
        # Host-known configuration and shapes are fine.
        "def f(x: torch.Tensor, ratio: int):\n    if ratio > 1:\n        x = x * 2\n    return x\n",
        "def f(x: torch.Tensor, start_pos: int):\n    if x.shape[0] > 1:\n        x = x[:1]\n    return x\n",
        # The graph-safe boundary: the position is a device tensor, the branch a mask.
        "def f(kv: torch.Tensor, new: torch.Tensor, pos: torch.Tensor, ratio: int):\n"
        "    return torch.where(pos % ratio == ratio - 1, new, kv)\n",
        # Outside the captured region (host orchestration) a per-step branch is expected.
        "def prepare(state, start_pos: int):  # graphlint: host\n    if start_pos == 0:\n        state.reset()\n",
        # The first step against the rest (mamba_ssm's `inference_params.seqlen_offset > 0`,
        # litgpt's `input_pos_maxp1 is not None`): every decode step takes the same branch.
        "def f(x: torch.Tensor, start_pos: int):\n    if start_pos == 0:\n        return x\n    return x * 2\n",
        "def f(x: torch.Tensor, mask: torch.Tensor, input_pos_maxp1=None):\n"
        "    if input_pos_maxp1 is not None:\n        mask = mask[..., :8]\n    return x + mask\n",
        # A bounds check only raises: the captured path never takes it.
        "def f(x: torch.Tensor, start_pos: int, max_len: int):\n    if start_pos >= max_len:\n"
        "        raise ValueError('too long')\n    return x\n",
    ]
    INVALID = [
        # The position derived first, then tested against zero, still changes per step.
        "def f(x: torch.Tensor, start_pos: int, ratio: int):\n    rem = (start_pos + 1) % ratio\n"
        "    if rem == 0:\n        x = x * 2\n    return x\n",
        "def f(x: torch.Tensor, start_pos: int, ratio: int):\n    if (start_pos + 1) % ratio == 0:\n"
        "        x = x * 2\n    return x\n",
        # The reference port's compressor (dsv4_model/reference.py): the runtime sees the ops differ.
        "class Compressor:\n    def forward(self, x: torch.Tensor, start_pos: int):\n"
        "        should_compress = (start_pos + 1) % self.ratio == 0\n        if should_compress:\n"
        "            x = torch.cat([x, x], dim=1)\n        return x\n",
        "def f(x: torch.Tensor, step: int):\n    return x * 2 if step % 4 == 3 else x\n",
        "class Attn:\n    def forward(self, x: torch.Tensor):\n        while self.cur_pos > 8:\n"
        "            x = x * 0.5\n            break\n        return x\n",
    ]

    _per_step: set[str] = set()
    _params: set[str] = set()
    _active = False  # module-level code runs before any function

    def visit_FunctionDef(self, node: cst.FunctionDef, ctx: Context) -> None:
        self._per_step, self._active = per_step_names(node, ctx)
        params = node.params
        self._params = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}

    def _check(self, test: cst.BaseExpression, ctx: Context) -> None:
        if self._active and ctx.value(test).kind not in (DEVICE, HOST_TENSOR) and any(
                mentions(part, self._per_step, ctx) and not self._same_every_decode_step(part)
                for part in _test_operands(test)):
            ctx.report(self, test)

    def _same_every_decode_step(self, test: cst.BaseExpression) -> bool:
        """`start_pos == 0`, `params.seqlen_offset > 0`, `input_pos_maxp1 is not None`: the
        position itself (a parameter or an attribute, not a local computed from it) tested
        against none or zero splits the first step (prefill) from decode, and every decode step
        takes the same branch, so the capture freezes nothing that changes."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return False
        left, target = test.left, test.comparisons[0]
        source = isinstance(left, cst.Attribute) or (isinstance(left, cst.Name) and left.value in self._params)
        if not source:
            return False
        if isinstance(target.operator, (cst.Is, cst.IsNot)):
            return isinstance(target.comparator, cst.Name) and target.comparator.value == "None"
        return (isinstance(target.operator, (cst.Equal, cst.NotEqual, cst.GreaterThan, cst.LessThanEqual))
                and isinstance(target.comparator, cst.Integer) and target.comparator.value == "0")

    def visit_If(self, node: cst.If, ctx: Context) -> None:
        if _only_raises(node.body) and node.orelse is None:
            return  # a bounds check (`if pos > max_len: raise ...`): the captured path never raises
        self._check(node.test, ctx)

    def visit_While(self, node: cst.While, ctx: Context) -> None:
        self._check(node.test, ctx)

    def visit_IfExp(self, node: cst.IfExp, ctx: Context) -> None:
        self._check(node.test, ctx)


def _test_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of `and` / `or` / `not` in a branch test, each judged alone."""
    if isinstance(test, cst.BooleanOperation):
        return _test_operands(test.left) + _test_operands(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _test_operands(test.expression)
    return [test]


def _only_raises(block: cst.BaseSuite) -> bool:
    body = block.body
    if isinstance(block, cst.IndentedBlock):
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine):
            return False
        body = body[0].body
    return len(body) == 1 and isinstance(body[0], cst.Raise)


RULES = [PerStepBranch]
