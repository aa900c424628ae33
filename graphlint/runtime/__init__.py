"""The runtime half: run a target's decode step and see what a CUDA graph would make of it.
`harness.run_harness` is the entry point; the rooms are `targets/`, `tracing/`, `cuda/`,
`emulation/`, `torch_compile/` and `isolation/` (one worker subprocess per device)."""
