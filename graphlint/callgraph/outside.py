"""Models and layers another library builds: calling one runs code outside the linted files.

`AutoModelForCausalLM.from_pretrained(...)` gives a transformers model whose forward the
capture runs, vLLM's `RowParallelLinear(...)` a layer, `mamba_ssm`'s `create_block(...)` a
block: none is torch's own module (whose forward graphlint knows) nor a kernel function called
as such (`flash_attn_with_kvcache(...)`), so a captured call of one leaves what the step runs
unchecked, and says so.
"""
from __future__ import annotations

from graphlint.analysis.names import torch_or_stdlib
from graphlint.callgraph.tags import EXT


def outside_model(value: tuple) -> bool:
    """What a call into a library outside torch and the standard library returned, or the
    forward of one of its submodules: a constructor's or a loader's object (`...Linear()`,
    `...Model.from_pretrained()`, `...from_pretrained().language_model.forward`), never one of
    its other methods (`runner().make_output_buffers`)."""
    if value[0] != EXT:
        return False
    name = str(value[1])
    built = name.find("()")
    if built < 0 or torch_or_stdlib(name):
        return False
    tail = name[built + 2:]
    if tail and not (tail.endswith(".forward") and "(" not in tail and "[" not in tail):
        return False
    # What a library call returned, called: a constructor's module (`Rearrange()`), a loader's
    # model (`AutoModel.from_pretrained()`, `mylib.load()`); a kernel is called as a function.
    return "." in name[:built]
