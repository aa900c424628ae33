"""Every phase on a CUDA device: sync detection, allocation audit, trial capture, replay and the
benchmark (`cuda_run`), run inside a worker subprocess per device."""
