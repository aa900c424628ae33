"""Per-file analysis, the first stage after discovery. Here: fast child access and positions on
libcst trees (`children`, `positions`), import names (`names`), the torch catalogue
(`catalog`), and the per-file facts the project stages read (`call_facts`, `capture_sites`,
`step_values`, `summaries`). In subpackages: the file as text (`text/`), device-value
inference per function (`inference/`) and one file's pass with the rule base (`walk/`).
Nothing here sees another file or the config.
"""
