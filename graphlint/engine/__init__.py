"""The static run, stage by stage: `run` orchestrates, `pool` analyses files in worker
processes, `cache` keeps per-file results on disk, `finalize` applies the config to them and
`fingerprints` names each finding so baselines recognise it across edits.

The per-file analysis depends only on the file's text and graphlint's version, so it is cached
and computed in any order; everything that depends on the config happens after, in `finalize`,
which is cheap and deterministic (output is identical for any --jobs). bench/README.md has the
figures.
"""
from graphlint.engine.cache import Cache
from graphlint.engine.finalize import finalize
from graphlint.engine.pool import analyse_all, default_jobs
from graphlint.engine.run import check, collect_tasks

__all__ = ["Cache", "analyse_all", "check", "collect_tasks", "default_jobs", "finalize"]
