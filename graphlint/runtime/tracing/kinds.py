"""What each runtime event kind and replay hazard kind means and how to fix it, as the rules' docs do.

`graphlint explain KIND` (or `runtime/KIND`) prints an entry; the text view, the pytest plugin's assertion message and
the cross-check use the `fix` line. The kinds are the `kind` of `runtime.sync_events` records
(`op_catalog.KINDS`) and the `hazard` of `runtime.replay.hazards` records (`hazards.WHY`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    name: str
    source: str  # "sync event" | "replay hazard"
    family: str  # the rule family a static rule for it belongs to
    what: str
    why: str
    example: str
    fix: str

    def docs(self) -> str:
        return (f"## What it is\n{self.what}\n\n## Why it breaks a CUDA graph\n{self.why}\n\n"
                f"## Example\n    {self.example}\n\n## Use instead\n{self.fix}")


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("host-read", "sync event", "GL1",
         "The step read a device value on the host: `.item()`, `int()`/`float()`/`bool()` of a tensor, "
         "`if t:`, an f-string or `print` of a tensor, `torch.equal`, a tensor used as a Python index.",
         "The host waits for the device every step; during capture the read is an error ('operation not "
         "permitted when stream is capturing'), and a branch on the value is frozen into the graph.",
         "scale = h.abs().max().item()",
         "Keep the value on the device (`torch.where`, masks, `clamp`), or move the decision outside the "
         "captured step (read the result after replay)."),
    Kind("sync", "sync event", "GL1",
         "An explicit synchronisation inside the step: `torch.cuda.synchronize()`, `Event.synchronize()`, "
         "`Stream.synchronize()`, or an op that synchronises inside its kernel (`torch.mode`).",
         "A capture cannot wait for the device; eagerly it stalls the host every step.",
         "torch.cuda.synchronize()",
         "Remove it from the step; order work with `stream.wait_stream(...)` or events, and synchronise "
         "outside the graph where the host needs the result."),
    Kind("dynamic-shape", "sync event", "GL3",
         "An op whose output shape depends on the data: `nonzero`, boolean-mask indexing `x[mask]`, "
         "`unique`, `bincount`, `repeat_interleave` without `output_size`, one-argument `torch.where`.",
         "The host must learn the size (a sync), and a graph has fixed shapes.",
         "idx = mask.nonzero()",
         "Fixed shapes: `torch.where(mask, x, 0)`, `nonzero_static(size=...)`, `masked_fill`, "
         "`repeat_interleave(..., output_size=N)`, top-k with `-inf` masking."),
    Kind("d2h-copy", "sync event", "GL1",
         "A device-to-host copy inside the step: `.cpu()`, `.tolist()`, `.numpy()`, `.to('cpu')`.",
         "A synchronous copy stalls the host; during capture it fails or copies capture-time data.",
         "tokens = logits.argmax(-1).tolist()",
         "Copy after replay into a pinned buffer with `non_blocking=True` and an event, outside the step."),
    Kind("h2d-copy", "sync event", "GL4",
         "Host data copied to the device inside the step: `torch.tensor(list, device=...)`, a Python scalar "
         "written into one element (`x[i] = 3.0`), a pageable `non_blocking=True` copy.",
         "Capture rejects unpinned host copies, or freezes the host data of the capture step.",
         "pos = torch.tensor([start_pos], device=dev)",
         "Keep static device buffers and fill them in `prepare()` (outside the graph) with `copy_` from a "
         "pinned buffer."),
    Kind("frozen-scalar", "replay hazard", "GL5",
         "A non-tensor argument of an op (a Python int or float: a fill value, an offset, a slice bound) "
         "differs between steps.",
         "A graph records kernel arguments by value: every replay reuses the capture step's value, "
         "silently (no error, wrong results).",
         "self.buf.fill_(self.pos)   # self.pos set by prepare()",
         "Keep the value in a device tensor that `prepare()` or the step updates, and index with it "
         "(`index_select`, `index_copy_`, masks)."),
    Kind("control-flow", "replay hazard", "GL2",
         "The ops the step ran differ between steps: a Python branch or loop on a step-dependent host value.",
         "A graph replays the ops of the captured step only: the other branch never runs.",
         "if self.step % 4 == 3: self.compress()",
         "Run both paths and select with `torch.where` or a device mask, or capture one graph per branch."),
    Kind("shape-varies", "replay hazard", "GL4",
         "A tensor's shape differs between steps (a cache grown with `torch.cat`, a slice to the current length).",
         "A graph has the shapes of the captured step.",
         "self.cache = torch.cat([self.cache, kv])",
         "Preallocate to the maximum length and write in place at a device-side position; mask the unused part."),
    Kind("stale-input", "replay hazard", "GL5",
         "An op read a tensor the step did not create that is a different object than at the first step: "
         "`prepare()` rebinds an attribute (`self.x = new`) instead of copying into the static buffer.",
         "A graph reads the captured tensor's address; the new tensor is never seen.",
         "def prepare(self, step): self.x = make_input(step)",
         "Copy into the static buffer: `self.x.copy_(make_input(step))`."),
    Kind("dynamic-output-shape", "replay hazard", "GL3",
         "The step's outputs change shape between steps, or come from a data-dependent-shape op.",
         "A graph cannot produce outputs whose shape depends on the data.",
         "return x[mask]",
         "Return fixed-shape static outputs (padded, with a count or a mask beside them)."),
    Kind("other-device", "replay hazard", "GL5",
         "Ops ran on tensors of another device than the target's (host tensors in the step, or another GPU).",
         "Work outside the capturing device and stream is not captured: an empty or partial graph, stale replay.",
         "y = x.to('cuda:1') @ w1",
         "Keep the step on one device; capture each device on its own `torch.cuda.Stream(device=d)`."),
)}


def explain(name: str) -> Kind | None:
    """The kind named `name` or `runtime/name` (the SARIF rule id of runtime results; also the
    way to reach `frozen-scalar`, which is a rule's name too)."""
    return KINDS.get(name.removeprefix("runtime/"))
