"""Device-value inference: for every expression of a function, is it a device tensor, a host
tensor, a host value (int, shape, dtype, flag) or unknown?

Precision lives here. Rules flag a value only when this package says DEVICE, so host-known
branching (shapes, dtypes, Python ints, flags) is never reported. The analysis is a single
forward pass over the function body in program order, with a join at branches; it never
imports or runs the code it reads.

The kinds and their joins are in `lattice`; what a file, a function and the rest of the project
tell the inference in `facts`; the walk of one function body in `function_walk` (`Inference`),
with what an expression holds in `expressions` and what a call gives in `call_values`; what a
class's methods assign in `class_facts`; annotations in `annotation_kinds`; the scans of a body
before its walk in `body_scans`; and the small readings of syntax they share in `syntax`.
"""
