"""The compile phase (`--compile`): a target's step run through torch.compile with what torch said
recorded (`compile_run`, the only module that reads torch.compile internals) and turned into the
report's `runtime.compile` part (`compile_report`)."""
