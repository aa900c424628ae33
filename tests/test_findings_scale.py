"""Work per file grows with the file plus its findings, not with their product: a statement's
text is computed once for all the findings in it and stored once in the cache entry, a finding
stores its range and never its source line, and each finding still gets the innermost
statement that holds it (checked against a brute-force search on real code)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from graphlint.analysis.walk.file import FileFinding
from graphlint.config import Config
from graphlint.engine import check, fingerprints, pool

REPO = Path(__file__).resolve().parents[1]
HEAD = "import torch\n\n\ndef step(x: torch.Tensor):\n"


def test_a_finding_stores_its_range_not_its_line():
    assert "source_line" not in FileFinding.__dataclass_fields__


def test_many_findings_in_one_long_statement_store_its_text_once(tmp_path):
    source = tmp_path / "wide.py"
    source.write_text(HEAD + "    y = (" + ", ".join(f"x[{i}].item()" for i in range(2000)) + ")\n")
    data = pool.analyse_file(("wide.py", str(source)))
    assert len(data["findings"]) == 2000
    assert len(data["statement_texts"]) == 1 and {pair[0] for pair in data["fingerprint_texts"]} == {0}
    # One copy of the 28 kB statement, not 2,000 (56 MB before).
    assert len(json.dumps(data)) < 2_000_000


def test_each_statement_is_unparsed_once(monkeypatch):
    copied = []
    real_copy = fingerprints.copy.copy

    def counted(node):  # _unparse copies a statement to strip its body before unparsing it
        copied.append(node)
        return real_copy(node)

    monkeypatch.setattr(fingerprints.copy, "copy", counted)
    text = HEAD + "".join("    y = (x.item(), x.item(), x.item())\n" for _ in range(300))
    texts = fingerprints.finding_texts(text, _findings_of(text))
    assert len(texts) == 900 and len({statement for statement, _ in texts}) == 1
    assert len(copied) == 300  # once per statement, not once per finding


def _findings_of(text: str):
    from graphlint.analysis.walk.file import analyze_source
    from graphlint.rules import ALL_RULES

    return analyze_source("f.py", text, ALL_RULES).findings


def _brute_force_statement(source: "fingerprints._Source", finding) -> str:
    start, end = (finding.line, finding.col - 1), (finding.end_line, finding.end_col - 1)
    best, depth_of = None, {}
    for statement in source.statements:  # a parent is listed before its children
        line, col, end_line, end_col, node = statement
        depth_of[id(node)] = sum(1 for other in source.statements
                                 if other[:2] <= (line, col) and (end_line, end_col) <= other[2:4]
                                 and other[4] is not node)
        if (line, col) <= start and end <= (end_line, end_col):
            if best is None or depth_of[id(node)] > depth_of[id(best[4])]:
                best = statement
    if best is None:
        return "".join(source.line(finding.line).split())
    return source._unparse(best[4])


def test_the_sweep_finds_the_same_statement_as_a_brute_force_search():
    path = REPO / "dsv4_model" / "reference.py"
    text = path.read_text("utf-8")
    static = check([path], Config(root=REPO), jobs=1)
    findings = [f for f in static.findings if not f.rule.startswith("GL9")]
    assert len(findings) > 20  # the reference port's forward region
    source = fingerprints._Source(text)
    swept = source.statement_texts(findings)
    assert swept == [_brute_force_statement(source, f) for f in findings]


def test_non_ascii_columns_map_bytes_to_characters():
    text = HEAD + "    s = 'ééé'; x.item()\n"
    source = fingerprints._Source(text)
    line, col, _, _, node = source.statements[3]  # import, def, the assignment, then this
    assert isinstance(node, ast.Expr) and (line, col) == (5, 15)
