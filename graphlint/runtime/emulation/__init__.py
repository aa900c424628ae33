"""The CPU emulation of every phase (`cpu_run`), for machines and CI without CUDA: the capture is
predicted from the traced events and the replay hazards from comparing consecutive steps."""
