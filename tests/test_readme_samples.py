"""The README's command-output samples are what their commands print today: each marked sample
(`<!-- sample: COMMAND -->` before a fenced block) is compared with a fresh run, paths and
timings masked, by tools/readme_samples.py. Regenerate them with
`python tools/readme_samples.py --update`."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "tools" / "readme_samples.py")
readme_samples = importlib.util.module_from_spec(_spec)
sys.modules["readme_samples"] = readme_samples
_spec.loader.exec_module(readme_samples)

SAMPLES = readme_samples.samples(readme_samples.README.read_text("utf-8"))
FAST = next(s for s in SAMPLES if s.command.startswith("graphlint check"))


def test_the_readme_has_its_samples_marked():
    commands = [sample.command for sample in SAMPLES]
    assert any(c.startswith("graphlint check") for c in commands)
    assert any(c.startswith("graphlint audit") for c in commands)


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.command.split(" |")[0] for s in SAMPLES])
def test_sample_is_what_its_command_prints(sample):
    if "graphlint runtime" in sample.command:
        pytest.importorskip("torch")
    diff = readme_samples.stale(sample)
    assert diff is None, f"stale README sample (run `python tools/readme_samples.py --update`):\n{diff}"


def test_a_sample_edited_by_hand_fails():
    lines = FAST.text.splitlines()
    edited = readme_samples.Sample(FAST.command, FAST.start, FAST.end,
                                   "\n".join([*lines[:-1], lines[-1].replace("2 errors", "3 errors")]))
    assert edited.text != FAST.text
    diff = readme_samples.stale(edited)
    assert diff is not None and "3 errors" in diff


def test_masking_hides_timings_and_the_checkout_path_only():
    mask = readme_samples.masked
    assert mask("runtime verdict: FAIL (6.2 s)") == mask("runtime verdict: FAIL (12.0 s)")
    assert mask(f"{ROOT}/dsv4_model/x.py:3") == "<root>/dsv4_model/x.py:3"
    assert mask("eager 1.20 ms") == mask("eager 3 ms")
    assert mask("GL101 x2") != mask("GL101 x3") and mask("line 262:20") == "line 262:20"


def test_update_rewrites_a_stale_sample(tmp_path):
    text = readme_samples.README.read_text("utf-8").splitlines()
    readme = tmp_path / "README.md"
    text[FAST.start] = "a line nobody printed"
    readme.write_text("\n".join(text[:FAST.end + 1]) + "\n")  # up to the first sample's end
    assert readme_samples.update(readme) == 1
    [fresh] = [s for s in readme_samples.samples(readme.read_text("utf-8")) if s.command == FAST.command]
    assert fresh.text == FAST.text or readme_samples.masked(fresh.text) == readme_samples.masked(FAST.text)


def test_a_marker_without_a_block_is_an_error():
    with pytest.raises(ValueError, match="not followed by"):
        readme_samples.samples("<!-- sample: graphlint rules -->\ntext\n")
