"""The per-file facts the call graph reads: the expression encoding, the pass over a function
body, and the file's facts (functions, classes, globals, what each call passes)."""
