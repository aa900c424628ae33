"""Models and layers another library builds: calling one runs code outside the linted files.

`AutoModelForCausalLM.from_pretrained(...)` gives a transformers model whose forward the
capture runs, vLLM's `RowParallelLinear(...)` a layer: neither is torch's own module (whose
forward graphlint knows) nor a kernel function (`flash_attn_with_kvcache`), so a captured call
of one leaves what the step runs unchecked, and says so.
"""
from __future__ import annotations

import sys

from graphlint.analysis import catalog
from graphlint.callgraph.tags import EXT

_TORCH = catalog.prefix("namespaces", "torch")


def outside_model(value: tuple) -> bool:
    """An instance of a class outside torch, the standard library and the linted files, or the
    forward of one of its submodules: what a library's constructor or loader gives
    (`...Linear()`, `...Model.from_pretrained()`, `...from_pretrained().language_model.forward`),
    never one of its other methods (`runner().make_output_buffers`)."""
    if value[0] != EXT:
        return False
    name = str(value[1])
    built = name.find("()")
    if built < 0 or name.startswith(_TORCH) or name.split(".", 1)[0] in sys.stdlib_module_names:
        return False
    tail = name[built + 2:]
    if tail and not (tail.endswith(".forward") and "(" not in tail and "[" not in tail):
        return False
    # A class among the dotted parts before the call: a constructor (`Rearrange()`) or a
    # class's loader (`AutoModel.from_pretrained()`); a function's result (`flash_attn_func()`)
    # is a tensor.
    parts = name[:built].split(".")
    return len(parts) > 1 and any(part[:1].isupper() for part in parts[1:])
