"""Does indexing with a 0-dim integer CUDA tensor read it on the host? Run on a GPU (bench/h200_checks.sh probe):
sync debug mode around each form, then a capture of `w[idx]` replayed after `idx` changed."""
import torch
dev = "cuda"
w = torch.randn(8, 4, 4, device=dev)
idx = torch.tensor(3, device=dev)
torch.cuda.synchronize()
res = {}
for name, fn in {"param[idx0]": lambda: w[idx], "param[idx0, 1]": lambda: w[idx, 1],
                 "param[idx1d]": lambda: w[idx.view(1)], "slice[:idx0]": lambda: w[:idx],
                 "int(idx0)": lambda: int(idx)}.items():
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn(); res[name] = "no sync"
    except RuntimeError as e:
        res[name] = "SYNC: " + str(e).splitlines()[0][:80]
    finally:
        torch.cuda.set_sync_debug_mode("default")
print(res)
# capture w[idx] and replay with another idx
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(2): out = w[idx] * 1
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        out = w[idx] * 1
    idx.fill_(5); g.replay(); torch.cuda.synchronize()
    print("capture ok; replay follows new idx:", torch.equal(out, w[5]), "stale:", torch.equal(out, w[3]))
except Exception as e:
    print("capture failed:", type(e).__name__, str(e)[:120])
