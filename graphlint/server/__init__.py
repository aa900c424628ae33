"""`graphlint server`: a language server (pygls 2, lsprotocol types) that publishes the findings
of `check` as diagnostics while the user types, with hovers, suppression quick fixes and the
rule docs. `app` wires the features; `linting`, `diagnostics`, `hover` and `actions` do one job each."""
