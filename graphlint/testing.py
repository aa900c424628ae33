"""Lint a code snippet in memory, as the rule examples and the test suite do: the same pipeline
as `check` (graphlint.engine.pipeline), with the snippet analysed in this process."""
from __future__ import annotations

from pathlib import Path

from graphlint.analysis.text import suppressions
from graphlint.analysis.walk.file import analyze_source
from graphlint.analysis.walk.stack import run_deep
from graphlint.config import Config
from graphlint.engine import Cache, finalize
from graphlint.engine.pipeline import analyse_project
from graphlint.engine.pool import analysis_to_dict
from graphlint.report import Finding
from graphlint.rules import ALL_RULES

PRELUDE = "import torch\nfrom torch import nn\n"


def lint_snippet(code: str, path: str = "snippet.py", config: Config | None = None,
                 select: tuple[str, ...] = (), prelude: bool = True) -> list[Finding]:
    """Findings for one snippet; a snippet that imports nothing from torch gets `import torch`
    and `from torch import nn` prepended (and line numbers shift by two). Without a config every
    function is per-step (the sweep), as a rule's examples read; with one, its regions apply."""
    if prelude and "import torch" not in code:
        code = PRELUDE + code
    config = config or Config(root=Path("."), regions="sweep")

    # On the large stack the engine's workers use, so deep but valid code is analysed as there.
    def first(tasks):
        return [analysis_to_dict(run_deep(analyze_source, path, code, ALL_RULES, True), suppressions.scan(code))]

    def again(todo):
        return {index: analysis_to_dict(run_deep(analyze_source, path, code, ALL_RULES, True, facts, False),
                                        suppressions.scan(code))
                for index, _, _, facts in todo}

    project = analyse_project([(path, path)], config, Cache(None), jobs=1, first=first, again=again)
    return finalize(project.files, config, select, (), project.placements, project.warmed_up, project.incomplete)
