"""What the rule families share, computed once per function where it is costly: reading calls
(`_calls`), whether a function handles several devices (`_devices`), where an allocated tensor
goes (`_escape`), and what a function does with graphs, streams and devices (`_orchestration`)."""
