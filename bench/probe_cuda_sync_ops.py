"""Check, on the CUDA machine at hand, which ops sync or fail to capture: the evidence behind
graphlint/data/cuda_sync_ops.toml (each entry names the torch version and device it was seen on).

    python bench/probe_cuda_sync_ops.py --out probe.json

For each probe: the number of "synchronizing CUDA operation" warnings of one call under sync debug
mode "warn", then a capture of the call on a side stream (sync debug mode off, so the capture error
is torch's own). Prints one JSON line per probe; the catalogue's ops come first.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings

import torch

SYNC_MESSAGE = "synchronizing CUDA operation"


def probes(dev: torch.device) -> dict:
    """name -> a callable running the op once on small device tensors."""
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(64, 64, device=dev, generator=g)
    a = torch.randn(8, 64, device=dev, dtype=torch.bfloat16)
    w = torch.randn(4, 64, 64, device=dev, dtype=torch.bfloat16)
    offs = torch.tensor([2, 4, 6, 8], device=dev, dtype=torch.int32)
    p = torch.rand(4, 16, device=dev)
    q = torch.tensor([0.25, 0.5], device=dev)
    sorted_ = torch.sort(torch.rand(32, device=dev)).values
    idx = torch.randint(0, 64, (16,), device=dev)
    qkv = torch.randn(1, 4, 8, 16, device=dev, dtype=torch.bfloat16)
    grouped = {}
    # grouped_mm by dtype and weight layout (transformers passes `weight.transpose(-2, -1)`), with
    # decode-sized groups: 2 rows, some experts empty (offsets 0, 2, 2, 2).
    few = torch.tensor([0, 2, 2, 2], device=dev, dtype=torch.int32)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        name = str(dtype).replace("torch.", "")
        a_d, w_d = a.to(dtype), w.to(dtype)
        grouped[f"torch._grouped_mm {name}"] = lambda a_d=a_d, w_d=w_d: torch._grouped_mm(a_d, w_d, offs=offs)
        grouped[f"torch._grouped_mm {name} transposed weight"] = (
            lambda a_d=a_d, w_d=w_d: torch._grouped_mm(a_d, w_d.transpose(-2, -1), offs=offs))
        grouped[f"F.grouped_mm {name} transposed, 2 rows"] = (
            lambda a_d=a_d, w_d=w_d: torch.nn.functional.grouped_mm(a_d[:2], w_d.transpose(-2, -1), offs=few))
    return {
        "control: x.sum().item()": lambda: x.sum().item(),
        **grouped,
        "torch.randperm(20000)": lambda: torch.randperm(20000, device=dev),
        "torch.randperm(16)": lambda: torch.randperm(16, device=dev),
        "torch.multinomial(replacement=False)": lambda: torch.multinomial(p, 4, replacement=False),
        "torch.multinomial(replacement=True)": lambda: torch.multinomial(p, 4, replacement=True),
        "torch.quantile(tensor q)": lambda: torch.quantile(x, q),
        "torch.quantile(float q)": lambda: torch.quantile(x, 0.5),
        "torch.median": lambda: x.median(),
        "torch.kthvalue": lambda: torch.kthvalue(x, 3, dim=-1),
        "torch.topk": lambda: torch.topk(x, 4, dim=-1),
        "torch.sort": lambda: torch.sort(x, dim=-1),
        "torch.searchsorted": lambda: torch.searchsorted(sorted_, p.reshape(-1)),
        "torch.histc(fixed bounds)": lambda: torch.histc(x, bins=8, min=-3, max=3),
        "torch.index_add_": lambda: x.clone().index_add_(0, idx, x[:16]),
        "F.embedding_bag": lambda: torch.nn.functional.embedding_bag(idx.reshape(4, 4), x),
        "F.scaled_dot_product_attention": lambda: torch.nn.functional.scaled_dot_product_attention(qkv, qkv, qkv),
        "torch.cumsum": lambda: torch.cumsum(x, 0),
    }


def count_syncs(fn) -> tuple[int, str | None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        except Exception as exc:
            return -1, f"{type(exc).__name__}: {exc}"[:300]
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    return sum(SYNC_MESSAGE in str(w.message) for w in caught), None


def try_capture(fn, dev: torch.device) -> dict:
    stream = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(stream):
        fn()  # warm-up on the capture stream
    torch.cuda.synchronize(dev)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            fn()
        graph.replay()
        torch.cuda.synchronize(dev)
        return {"capture": "ok"}
    except Exception as exc:
        return {"capture": "fail", "error": f"{type(exc).__name__}: {exc}".split("\n")[0][:300]}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("probe_cuda_sync_ops: needs CUDA", file=sys.stderr)
        return 2
    dev = torch.device("cuda:0")
    header = {"torch": torch.__version__, "device": torch.cuda.get_device_name(dev)}
    print(json.dumps(header), flush=True)
    rows = []
    for name, fn in probes(dev).items():
        syncs, error = count_syncs(fn)
        row = {"probe": name, "sync_warnings": syncs, **({"error": error} if error else {})}
        if error is None:
            row.update(try_capture(fn, dev))
        rows.append(row)
        print(json.dumps(row), flush=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump({**header, "probes": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
