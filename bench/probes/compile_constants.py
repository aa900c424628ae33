"""Probe (CUDA): what torch.compile(mode="reduce-overhead") does with host constants inside the
step, against a torch.cuda.graph capture of the same code. Prints one line per check.

- `torch.tensor(<literal>, device=...)` and `torch.tensor([0], device=...)` inside the step;
- a Python scalar written into one element (`m[0] = False`) and into a slice (`m[k:] = True`);
Under CUDA graphs the eager ops run at capture (host-to-device copies); under Inductor they are
traced. The probe counts synchronizing calls during replays (sync debug mode "warn"), cudagraph
skips, and compares results with eager for fresh inputs.
"""
from __future__ import annotations

import warnings

import torch


def step(x: torch.Tensor, k: int) -> torch.Tensor:
    t = torch.tensor(0.5, device=x.device, dtype=x.dtype)
    p = torch.tensor([0], device=x.device, dtype=torch.long)
    m = x > t
    m[0] = False
    m[k:] = True
    return torch.where(m, x, x * 0).sum() + x[p].sum()


def main() -> None:
    torch._dynamo.reset()
    compiled = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    from torch._dynamo.utils import counters
    x = torch.rand(64, device="cuda")
    for _ in range(3):  # warm-up and recording
        compiled(x, 8)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    wrong = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            x.copy_(torch.rand(64, device="cuda"))
            out = compiled(x, 8).clone()
            torch.cuda.set_sync_debug_mode(0)
            ref = step(x.clone(), 8)
            wrong += int(not torch.allclose(out, ref))  # a sync of its own: outside the counted region
            torch.cuda.set_sync_debug_mode("warn")
    torch.cuda.set_sync_debug_mode(0)
    syncs = [str(w.message)[:80] for w in caught if "synchroniz" in str(w.message)]
    print(f"compile: sync warnings during 5 replays: {len(syncs)} {syncs[:2]}")
    print(f"compile: cudagraph_skips={dict(counters['inductor']).get('cudagraph_skips', 0)} "
          f"graph_breaks={sum(counters['graph_break'].values())} wrong_results={wrong}")
    # The same step under torch.cuda.graph.
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    y = torch.rand(64, device="cuda")
    with torch.cuda.stream(s):
        for _ in range(3):
            step(y, 8)
    torch.cuda.synchronize()
    try:
        with torch.cuda.graph(g, stream=s):
            step(y, 8)
        print("cuda graph: captured")
    except Exception as error:  # noqa: BLE001 - the probe reports what capture raised
        print(f"cuda graph: capture failed: {type(error).__name__}: {str(error).splitlines()[0][:120]}")


if __name__ == "__main__":
    main()
