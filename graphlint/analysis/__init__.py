"""Per-file analysis, the first stage after discovery: parse (`file`), fast child access and
positions on libcst trees, import names, the torch catalogue, device-value inference per
function, inline suppressions, the rule base, and the per-file facts the call graph reads.
Nothing here sees another file or the config.
"""
