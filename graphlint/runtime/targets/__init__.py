"""Runtime targets: loading `module:callable` and `path.py:callable` targets (`loader`), and the
ready-made transformers target `hf:MODEL` (`hf_target`, with its small configs in `hf_configs`)."""
