"""Reading and rewriting ONNX graphs, with the ``onnx`` package's messages alone: what the
exporter (``onnx_export``) and the quantiser (``onnx_quantize``) both do to a model.

Our own code for what ``onnx`` has no call for: the operators of every subgraph, a ``Loop``'s
invariants read from its enclosing graph, and ONNX's topological order where subgraphs read
outer values (``onnx.helper`` and ``onnx.compose`` cover neither).
"""

ONNX_DOMAINS = ("", "ai.onnx")  # the default domain's two spellings


def operators(model_proto):
    """``{(domain, op_type)}`` of every node of the model, in its subgraphs (``Loop`` bodies)
    too; the default domain is ``""``."""
    found = set()
    graphs = [model_proto.graph]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            found.add((node.domain, node.op_type))
            for attribute in node.attribute:
                if attribute.g.node:
                    graphs.append(attribute.g)
                graphs.extend(attribute.graphs)
    return found


def non_standard_operators(model_proto):
    """The ``(domain, op_type)`` of the model's nodes that are not built-in ONNX operators of its
    opset: another domain (``com.microsoft``, a custom one), or a name ONNX does not define
    (a TensorFlow op the converter left as it was). Empty for an ELMo export."""
    import onnx  # lazy: the [onnx] extra

    opset = next(o.version for o in model_proto.opset_import if o.domain in ONNX_DOMAINS)
    unknown = []
    for domain, op_type in sorted(operators(model_proto)):
        if domain not in ONNX_DOMAINS or not onnx.defs.has(op_type, max_inclusive_version=opset):
            unknown.append((domain, op_type))
    return unknown


def keep_used_domains(model_proto):
    """Drops the model's opset imports of domains no node uses (tf2onnx imports ai.onnx.ml
    whether a node uses it or not, and a runtime without it would refuse the file)."""
    used = {domain for domain, _ in operators(model_proto)} | set(ONNX_DOMAINS)
    kept = [o for o in model_proto.opset_import if o.domain in used]
    del model_proto.opset_import[:]
    model_proto.opset_import.extend(kept)


def op_counts(model_proto):
    """``{graph path: {op_type: count}}`` of the model's main graph (``"main"``) and of every
    subgraph (``"main/NODE:ATTRIBUTE"``, a ``Loop``'s body)."""
    found = {}

    def visit(graph, path):
        counts = found.setdefault(path, {})
        for node in graph.node:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
            for attribute in node.attribute:
                for index, subgraph in enumerate(_subgraphs(attribute)):
                    suffix = "" if index == 0 else f"[{index}]"
                    visit(subgraph, f"{path}/{node.name}:{attribute.name}{suffix}")

    visit(model_proto.graph, "main")
    return found


def loop_invariants_from_outer_scope(graph):
    """Rewrites every ``Loop`` of ``graph`` (and of its subgraphs) so that a value its body
    passes through unchanged (a body output that is the body's own input) is read from the
    enclosing graph by name instead of being carried from iteration to iteration.

    tf2onnx turns every tensor a ``tf.while_loop`` captures (the LSTM kernels, the step
    offsets) into such a loop-carried value. Carried, a weight is a new value at each
    iteration: ONNX Runtime can neither fold nor prepack it, and its quantiser sees no
    constant weight in the body (``onnx_quantize``). Read from the enclosing scope, it is the
    initializer (or the folded slice of one) itself. The arithmetic is unchanged. A carried
    value's final output (the ``Loop``'s output for it) is the value it started with, so its
    readers read that instead."""
    renamed = {}  # a removed Loop output -> the value it always equals
    for node in graph.node:
        for i, name in enumerate(node.input):
            node.input[i] = renamed.get(name, name)
        for attribute in node.attribute:
            for subgraph in _subgraphs(attribute):
                loop_invariants_from_outer_scope(subgraph)
        if node.op_type != "Loop" or node.domain not in ONNX_DOMAINS:
            continue
        body = next(a.g for a in node.attribute if a.name == "body")
        carried = len(node.input) - 2
        keep = []
        for k in range(carried):
            outer, inner = node.input[2 + k], body.input[2 + k].name
            if outer and body.output[1 + k].name == inner:
                _rename_reads(body, inner, outer)
                renamed[node.output[k]] = outer
            else:
                keep.append(k)
        if len(keep) == carried:
            continue
        inputs = [node.input[0], node.input[1], *(node.input[2 + k] for k in keep)]
        outputs = [*(node.output[k] for k in keep), *node.output[carried:]]
        body_inputs = [body.input[0], body.input[1], *(body.input[2 + k] for k in keep)]
        body_outputs = [
            body.output[0],
            *(body.output[1 + k] for k in keep),
            *body.output[1 + carried :],
        ]
        for field, values in (
            (node.input, inputs),
            (node.output, outputs),
            (body.input, body_inputs),
            (body.output, body_outputs),
        ):
            copies = [_copy(v) for v in values]
            del field[:]
            field.extend(copies)
    for output in graph.output:
        if output.name in renamed:
            raise RuntimeError(f"a graph output ({output.name}) is a loop-invariant value")


def _subgraphs(attribute):
    """The graphs an attribute holds (a ``Loop``'s or ``If``'s body, ``Scan``'s)."""
    return [attribute.g, *attribute.graphs] if attribute.g.node else list(attribute.graphs)


def _copy(value):
    """A copy of a repeated field's element (a string, or a message) to re-add to it."""
    if isinstance(value, str):
        return value
    copy = type(value)()
    copy.CopyFrom(value)
    return copy


def _rename_reads(graph, old, new):
    """Every read of ``old`` in ``graph`` and its subgraphs reads ``new`` instead."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new
        for attribute in node.attribute:
            for subgraph in _subgraphs(attribute):
                _rename_reads(subgraph, old, new)
    kept = [v for v in graph.value_info if v.name != old]
    if len(kept) != len(graph.value_info):
        copies = [_copy(v) for v in kept]
        del graph.value_info[:]
        graph.value_info.extend(copies)


def sort_topologically(graph):
    """Puts the nodes of ``graph`` in an order where every node comes after the nodes whose
    outputs it reads, those its subgraphs read from this graph included (ONNX's rule for a
    valid graph); the order of independent nodes is kept."""
    produced_by = {name: index for index, node in enumerate(graph.node) for name in node.output}
    needs = [
        {produced_by[name] for name in _reads(node) if name in produced_by} - {index}
        for index, node in enumerate(graph.node)
    ]
    order, placed = [], set()
    for root in range(len(graph.node)):  # depth first, a loop: a long chain is no recursion
        if root in placed:
            continue
        stack, on_path = [(root, iter(sorted(needs[root])))], {root}
        while stack:
            index, pending = stack[-1]
            for before in pending:
                if before in on_path:
                    raise RuntimeError(f"the graph has a cycle through {graph.node[before].name}")
                if before not in placed:
                    on_path.add(before)
                    stack.append((before, iter(sorted(needs[before]))))
                    break
            else:  # every node it reads is placed: place it
                stack.pop()
                on_path.discard(index)
                placed.add(index)
                order.append(index)
    nodes = [_copy(graph.node[index]) for index in order]
    del graph.node[:]
    graph.node.extend(nodes)


def _reads(node):
    """The names ``node`` reads: its inputs, and what its subgraphs read from outside them."""
    names = [name for name in node.input if name]
    for attribute in node.attribute:
        for subgraph in _subgraphs(attribute):
            names.extend(_outer_reads(subgraph))
    return names


def _outer_reads(graph):
    """The names ``graph``'s nodes read that the graph does not define (its enclosing scopes')."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    defined |= {name for node in graph.node for name in node.output}
    return [name for node in graph.node for name in _reads(node) if name not in defined]
