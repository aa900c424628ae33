"""What the methods of one class assign to `self`, joined over the class (`collect_class`): each
method walked by the inference, plus `register_buffer`/`register_module` calls and class-level
annotations."""
from __future__ import annotations

from graphlint.lazy import cst

from graphlint.analysis import catalog
from graphlint.analysis.children import iter_code
from graphlint.analysis.inference.annotation_kinds import annotation_value
from graphlint.analysis.inference.facts import ClassInfo, ModuleFacts
from graphlint.analysis.inference.function_walk import Inference
from graphlint.analysis.inference.lattice import V_DEVICE, V_MODULE
from graphlint.analysis.names import class_bases, dotted

_REGISTER_TENSOR = catalog.names("modules", "register_tensor")
_REGISTER_MODULE = catalog.names("modules", "register_module")
_REGISTERS = _REGISTER_TENSOR | _REGISTER_MODULE


def collect_class(node: cst.ClassDef, facts: ModuleFacts) -> ClassInfo:
    """Attribute kinds assigned anywhere in the class: `self.x = ...`, `register_buffer`,
    `nn.Parameter`, submodules, and class-level annotations."""
    bases = [dotted(b) or "" for b in class_bases(node)]
    info = ClassInfo(node.name.value, bases)
    facts.classes[info.name] = info
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    info.assign(small.target.value, annotation_value(small.annotation.annotation, facts.imports))
        if not isinstance(stmt, cst.FunctionDef):
            continue
        inference = Inference(facts, None)
        inference.class_attrs = info.attrs
        inference.bind_params(stmt.params, is_method=True)
        inference.block(stmt.body)
        for attr, value in inference.self_attrs.items():
            info.assign(attr, value)
        info.advanced |= inference.advanced_attrs
        for call, name in _register_calls(stmt):
            method = call.func.attr.value if isinstance(call.func, cst.Attribute) else ""
            if method in _REGISTER_TENSOR:
                info.assign(name, V_DEVICE)
            elif method in _REGISTER_MODULE:
                info.assign(name, V_MODULE)
    return info


def _register_calls(func: cst.FunctionDef) -> list[tuple[cst.Call, str]]:
    found: list[tuple[cst.Call, str]] = []
    for node in iter_code(func.body):
        if (type(node) is cst.Call and isinstance(node.func, cst.Attribute)
                and isinstance(node.func.value, cst.Name)
                and node.func.value.value == "self"
                and node.func.attr.value in _REGISTERS
                and node.args and isinstance(node.args[0].value, cst.SimpleString)):
            found.append((node, node.args[0].value.evaluated_value))
    return found
