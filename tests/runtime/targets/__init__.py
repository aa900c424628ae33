"""Planted runtime targets: one known CUDA-graph hazard per file, plus one clean step.

Each follows the target protocol (`factory(device, **options)` -> object with `device`, `reset()`,
`prepare(step)`, `step()`). The line of each planted hazard carries a `# PLANTED:` marker that the
tests look up, so the expected line numbers never drift from the code.
"""
