"""`python -m dsv4_model generate`: greedy tokens, ms per token and a final JSON line."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsv4_model.cli import main
from dsv4_model.testing import one_torch_thread  # noqa: F401  (autouse fixture)

ROOT = Path(__file__).resolve().parents[1]


def _last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def test_generate_on_cpu_as_a_module():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "dsv4_model", "generate", "--prompt-len", "8", "--steps", "16", "--device", "cpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = _last_json(proc.stdout)
    assert result["mode"] == "eager" and result["device"] == "cpu"
    assert result["decode_steps"] == 8 + 16 - 1 and result["ms_per_token"] > 0
    assert len(result["tokens"]) == 1 and len(result["tokens"][0]) == 16
    assert proc.stdout.startswith("row 0: ")


def test_graph_safe_and_reference_generate_the_same_tokens(capsys):
    args = ["generate", "--prompt-len", "5", "--steps", "12", "--batch", "2", "--dtype", "fp32", "--seed", "3"]
    assert main(args) == 0
    safe = _last_json(capsys.readouterr().out)
    assert main(args + ["--reference"]) == 0
    ref = _last_json(capsys.readouterr().out)
    assert ref["mode"] == "reference" and safe["tokens"] == ref["tokens"]
    assert len(safe["tokens"]) == 2 and all(len(row) == 12 for row in safe["tokens"])


@pytest.mark.parametrize("extra", [["--cuda-graph"], ["--check-eager"]])
def test_cuda_only_modes_refuse_the_cpu(extra):
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--device", "cpu", *extra])
    assert exc.value.code not in (0, None)


def test_too_long_a_run_is_refused():
    with pytest.raises(SystemExit):
        main(["generate", "--prompt-len", "8", "--steps", "1024"])
