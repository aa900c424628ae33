"""GL905: a captured region graphlint could not follow to its end. The call graph emits it at
the capture site, so that a region nobody could read never passes as a region with no hazard."""
from __future__ import annotations

from graphlint.analysis.walk.rule import Rule


class IncompleteCaptureRegion(Rule):
    """Flags a capture site (`with torch.cuda.graph(...)`, `capture_begin`, `make_graphed_callables`,
    `torch.compile(mode="reduce-overhead")`) whose callee graphlint cannot resolve, or whose
    region calls code graphlint could not follow (a receiver of unknown type, a project module
    outside the linted files).

    The message names the calls and says what was checked in their place (every nn.Module
    forward, when the callee itself is unknown). `graphlint audit` reports such a region as
    INCOMPLETE, never PASS.

    ## Why it breaks a CUDA graph
    It does not, by itself: but whatever the unresolved call runs is captured too, and its
    hazards are unchecked. A linter that says nothing here reads as "no hazard".

    ## Example
        def capture_step(step_fn, inputs):
            with torch.cuda.graph(graph):
                out = step_fn(*inputs)      # step_fn comes from outside the linted files

    ## Use instead
    Lint the files that define the captured code, annotate the receiver (`self.model: TinyLM`),
    name the root with `entry-points = ["pkg.model:TinyLM.forward"]` or a `# graphlint: entry`
    comment, or record the region from a real run (`graphlint runtime --record-regions`).
    """

    code = "GL905"
    name = "incomplete-capture-region"
    severity = "warning"
    applies_in_host_code = True  # reported at the capture site, in the function that captures
    message = "the captured region is incomplete: graphlint could not follow what it runs"
    fix = ("lint the files that define the captured code, annotate the receiver's type, or name the root "
           "with entry-points / a `# graphlint: entry` comment")
    VALID: list[str] = []
    INVALID: list[str] = []


RULES = [IncompleteCaptureRegion]
