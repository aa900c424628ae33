"""The CI templates and docs install this project from its repository at a pinned revision,
never the unrelated `graphlint` of the package index. (Running the install commands is in
tests/test_install.py, marked `install`.)"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = [ROOT / "ci" / "github" / "graphlint.yml", ROOT / "ci" / "gitlab-ci.yml"]
BARE = re.compile(r"pip install\s+['\"]?graphlint(?![-\w])(?!\[)", re.IGNORECASE)


def test_no_template_or_doc_installs_graphlint_from_the_index():
    for path in [*TEMPLATES, ROOT / "README.md", ROOT / "ci" / "gate.sh"]:
        text = path.read_text()
        assert not BARE.search(text), f"{path}: {BARE.search(text).group(0)}"


def test_every_install_in_the_templates_is_pinned_to_a_revision():
    for path in TEMPLATES:
        text = path.read_text()
        yaml.safe_load(text)  # still valid YAML
        installs = [line for line in text.splitlines() if "pip install" in line and not line.lstrip().startswith("#")]
        assert installs, path
        for line in installs:
            assert "git+${GRAPHLINT_REPO}@${GRAPHLINT_REV}" in line, (path, line)
