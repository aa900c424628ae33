"""GL9xx: findings about graphlint's own input (files it cannot parse, suppressions it cannot
honour). The engine emits them; they are rules so that `explain` and select/ignore work."""
from __future__ import annotations

from graphlint.analysis.walk.rule import Rule


class ParseError(Rule):
    """Flags a file that does not parse.

    ## Why it breaks a CUDA graph
    It does not, by itself: but graphlint cannot check a file it cannot read, so the file's
    hazards are unknown. The run goes on with the other files.

    ## Example
        def step(x:
            return x

    ## Use instead
    Fix the syntax error (graphlint parses Python 3.8 to 3.13 syntax), or exclude the file in
    `[tool.graphlint] exclude`.
    """

    code = "GL900"
    name = "parse-error"
    message = "file could not be parsed; its hazards were not checked"
    fix = "fix the syntax error or exclude the file"


class UnknownSuppression(Rule):
    """Flags a suppression comment naming a code or name that no rule has.

    In `# graphlint: ignore[...]` and `# graphlint: noqa: ...` every entry is graphlint's. In a
    `# noqa:` list only graphlint's own namespace is judged: `GL` codes and rule-name-shaped
    entries (lower-case words joined by hyphens, `item-call`); other tools' codes (`E501`,
    `BLE001`) are theirs and never reported.

    ## Why it breaks a CUDA graph
    It does not; but a misspelt suppression silences nothing, and a reader believes a hazard
    was reviewed.

    ## Example
        x.item()  # graphlint: ignore[GL1O1]
        x.item()  # noqa: item-cal

    ## Use instead
    Name an existing rule by code or name: `# graphlint: ignore[GL101]`,
    `# graphlint: ignore[item-call]` or `# noqa: item-call`; `graphlint rules` lists them.
    """

    code = "GL901"
    name = "unknown-suppression"
    severity = "warning"
    message = "suppression names an unknown rule"
    fix = "name an existing rule code or name (see `graphlint rules`)"
    VALID = [
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa: item-call, E501, BLE001\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa: GL101 - the URL in long-lines is fine\n",
        "# graphlint: noqa: GL1, tolist-call\n"
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()\n",
    ]
    INVALID = [
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # graphlint: ignore[GL1O1]\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa: item-cal\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa: E501, GL1O1\n",
        "# graphlint: noqa: item-cal\n"
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()\n",
    ]


class UnusedSuppression(Rule):
    """Flags a suppression comment that suppresses nothing in this run (as ruff's RUF100).

    Off by default, as RUF100 is: select it (`--select GL902`, `select = ["GL902"]`, or a
    prefix such as GL9) to clean up suppressions whose findings were fixed.

    ## Why it breaks a CUDA graph
    It does not; but a stale `# graphlint: ignore[GL101]` hides the next real sync that lands
    on that line, unreviewed.

    ## Example
        n = x.shape[0]  # graphlint: ignore[GL101]

    A bare `# noqa` suppresses every rule on its line, so it counts as unused where no
    graphlint finding is on that line (another linter's finding it silences is not seen); a
    file-level `# graphlint: noqa` is unused where no finding of the codes it lists is in the file.

    ## Use instead
    Remove the comment, or the codes in it that no longer match a finding on that line (or on
    the first line of its statement).
    """

    code = "GL902"
    name = "unused-suppression"
    severity = "warning"
    default_enabled = False
    message = "suppression comment suppresses nothing"
    fix = "remove the comment or the codes in it that match no finding"
    VALID = [
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # graphlint: ignore[GL101] -- logged once per request\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa: GL101\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa\n",
        "# graphlint: noqa: item-call\n"
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x + 1  # noqa: E501\n",
    ]
    INVALID = [
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max()  # graphlint: ignore[GL101]\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x + 1  # noqa\n",
        "# graphlint: noqa: GL305\n"
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa: GL101\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x.max().item()  # noqa: GL101, GL201\n",
        "def decode_step(x: torch.Tensor):\n"
        "    return x + 1  # graphlint: ignore\n",
    ]


class FileNotAnalysed(Rule):
    """Flags a file that graphlint did not analyse because it is beyond one of its limits: larger
    than `max-file-size`, nested too deeply for the analysis, slower than the per-file time
    budget (`file-timeout`), or a file on which the parser crashed. The message gives the reason.

    ## Why it breaks a CUDA graph
    It does not, by itself: but the file's hazards are unknown. The limits keep one generated,
    minified or hostile file from stalling or crashing a run; every other file is still checked.

    ## Example
        # a 40 MB generated table of weights, or a chain of 100,000 `elif` branches
        WEIGHTS = [0.1, 0.2, ...]

    ## Use instead
    Exclude generated files in `[tool.graphlint] exclude`, raise `max-file-size` or
    `file-timeout` for a file that must be checked, or split the file.
    """

    code = "GL903"
    name = "file-not-analysed"
    message = "file was not analysed; its hazards were not checked"
    fix = "exclude the file, split it, or raise max-file-size / file-timeout"
    # Deep but valid code is analysed, not reported: CPython compiles all of these.
    VALID = [
        "def step(x: torch.Tensor, a: int):\n    if a == 0:\n        pass\n"
        + "".join(f"    elif a == {i}:\n        pass\n" for i in range(1, 480)),
        "def step(x: torch.Tensor):\n    return " + " + ".join(["x"] * 490) + "\n",
        "def step(x: torch.Tensor):\n    return x" + ".abs()" * 325 + "\n",
        "def step(x: torch.Tensor, c: bool):\n    return " + " if c else ".join(["x"] * 480) + "\n",
        "def step(x: torch.Tensor):\n    return x" + "[0]" * 325 + "\n",
    ]
    # Larger than the default max-file-size (1 MiB).
    INVALID = ["def step(x: torch.Tensor):\n    return x\n" + "y = 0\n" * 180_000]


class StaleRegionFile(Rule):
    """Flags a region file (`graphlint runtime --record-regions`) whose recorded functions no
    longer match the code: a function it names is gone, or its source changed since the run.
    Reported once per region file, naming the stale entries.

    ## Why it breaks a CUDA graph
    It does not, by itself: but the captured region the static check reads from the file was
    learned from code that has since changed, so a renamed or new function the step now runs
    may be checked as if it were outside the graph. The entries that still match count as captured.

    ## Example
        # .graphlint/regions.json recorded `Attention.forward`; the method was renamed `attend`

    ## Use instead
    Record the file again on the target: `graphlint runtime TARGET --record-regions`, and commit
    it with the change (CI can do it on a machine that runs the target).
    """

    code = "GL904"
    name = "stale-region-file"
    severity = "warning"
    message = "region file is stale"
    fix = "record it again: graphlint runtime TARGET --record-regions"


RULES = [ParseError, UnknownSuppression, UnusedSuppression, FileNotAnalysed, StaleRegionFile]
