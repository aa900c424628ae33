"""The tags of the call graph's symbolic values (graphlint.callgraph.values says what each holds)."""
INST, CLS, FN, SUPER, MOD = "inst", "cls", "fn", "super", "mod"
LIST, TUPLE, DICT, BOUND = "list", "tuple", "dict", "bound"
EXT, PEXT, DYN, BUILTIN = "ext", "pext", "dyn", "builtin"  # library, project outside the lint, unknown
LAMBDA = "lambda"  # (LAMBDA, body, defining scope): calling it gives the body's value
STR = "str"  # (STR, text): a string literal, read only as the name `getattr` is given

EMPTY: frozenset = frozenset()


def join(base: str, attr: str) -> str:
    joined = f"{base}{attr}" if attr in ("()", "[]") else f"{base}.{attr}"
    return joined if len(joined) <= 120 else joined[:117] + "..."
