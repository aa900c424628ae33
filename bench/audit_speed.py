"""Time `graphlint audit` on a real decoder users lint: transformers' Llama, wall clock, cold cache.

    pip download --no-deps transformers -d /tmp/tf && cd /tmp/tf && python -m zipfile -e transformers-*.whl .
    python bench/audit_speed.py /tmp/tf/transformers

Two runs, each with `LlamaForCausalLM.forward` as the entry point: the modeling file alone, then
with the modules it calls into (cache, masks, layers, activations, modeling_utils, sdpa). Prints
one JSON line per run: seconds, exit code, files, reachable functions, unresolved calls, the goal
(10 s).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

GOAL_S = 10.0
ENTRY = "transformers.models.llama.modeling_llama:LlamaForCausalLM.forward"
CALLED_INTO = ["cache_utils.py", "masking_utils.py", "modeling_layers.py", "activations.py", "modeling_utils.py",
               "integrations/sdpa_attention.py", "modeling_outputs.py", "__init__.py", "models/__init__.py"]


def run(paths: list[str], label: str, root: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "audit.json")
        command = [sys.executable, "-m", "graphlint", "audit", *paths, "--entry-point", ENTRY, "--no-cache",
                   "--format", "json", "--output", out]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
        started = time.perf_counter()
        proc = subprocess.run(command, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - started
        data = json.load(open(out)) if os.path.exists(out) else {}
    return {"run": label, "seconds": round(seconds, 3), "goal_s": GOAL_S, "ok": seconds < GOAL_S and proc.returncode in (0, 1),
            "exit_code": proc.returncode, "files": data.get("files"),
            "reachable": data.get("summary", {}).get("reachable"), "counts": data.get("counts"),
            "unresolved_calls": len(data.get("unresolved_calls", [])), "stderr": proc.stderr.strip()[-300:] or None}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not os.path.isdir(os.path.join(argv[0], "models", "llama")):
        print(__doc__, file=sys.stderr)
        return 2
    package = os.path.abspath(argv[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    llama = os.path.join(package, "models", "llama", "modeling_llama.py")
    results = [run([llama], "modeling_llama.py", root),
               run([os.path.join(package, "models", "llama")] + [os.path.join(package, p) for p in CALLED_INTO],
                   "llama + called-into modules", root)]
    for result in results:
        print(json.dumps(result))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
