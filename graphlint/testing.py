"""Lint a code snippet in memory, as the rule examples and the test suite do."""
from __future__ import annotations

from pathlib import Path

from graphlint.analysis import suppressions
from graphlint.analysis.file import analyze_source
from graphlint.callgraph.summaries import solve
from graphlint.analysis.stack import run_deep
from graphlint.config import Config
from graphlint.engine import finalize
from graphlint.engine.pool import analysis_to_dict
from graphlint.report import Finding
from graphlint.rules import ALL_RULES

PRELUDE = "import torch\nfrom torch import nn\n"


def lint_snippet(code: str, path: str = "snippet.py", config: Config | None = None,
                 select: tuple[str, ...] = (), prelude: bool = True) -> list[Finding]:
    """Findings for one snippet; a snippet that imports nothing from torch gets `import torch`
    and `from torch import nn` prepended (and line numbers shift by two)."""
    if prelude and "import torch" not in code:
        code = PRELUDE + code
    # On the large stack the engine's workers use, so deep but valid code is analysed as there.
    result = run_deep(analyze_source, path, code, ALL_RULES, True)
    # What the snippet's own call sites say about its functions, as a check of files does.
    facts = solve([{"path": path, "extra": result.extra}], Path("."))[0]
    if facts:
        result = run_deep(analyze_source, path, code, ALL_RULES, True, facts)
    data = analysis_to_dict(result, suppressions.scan(code))
    return finalize([data], config or Config(root=Path(".")), select, ())
