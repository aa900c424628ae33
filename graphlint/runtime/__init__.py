"""The runtime half: run a target's decode step and see what a CUDA graph would make of it.

`harness.run_harness` is the entry point. Its rooms: `targets/` (what to run), `tracing/` (what a
step did), `cuda/` and `emulation/` (the phases on a device), `isolation/` (one subprocess per
device) and `torch_compile/` (the compile phase)."""
