"""graphlint's static check reports nothing on the graph-safe model (the lint config excludes
only the reference port, which keeps the seeds' violations on purpose)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _check(*args):
    return subprocess.run([sys.executable, "-m", "graphlint", "check", "--no-cache", "-q", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_graph_safe_model_is_lint_clean():
    proc = _check("dsv4_model")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_reference_port_is_flagged_in_every_family(tmp_path):
    # Outside the repository's config, so the exclusion does not apply.
    copy = tmp_path / "reference_copy.py"
    copy.write_text((ROOT / "dsv4_model" / "reference.py").read_text())
    proc = _check("--format", "json", str(copy))
    assert proc.returncode == 1, proc.stderr
    import json
    rules = {f["rule"] for f in json.loads(proc.stdout)["static"]["findings"]}
    for family in ("GL1", "GL2", "GL3", "GL4", "GL5"):
        assert any(r.startswith(family) for r in rules), (family, sorted(rules))
