"""The network after a layer, as a module of its own: what turns a layer's cached activations into the model's output.

The model's forward is traced with torch.fx, the layer kept as one opaque call; the tail is every operation that
depends on the layer's (last) call, rebuilt into a GraphModule whose one input is that call's output. It shares the
model's modules and parameters (nothing is copied). The tail cannot be separated when the forward does not trace
(data-dependent control flow, TorchScript), when the layer never runs as a module call, or when the operations after
the layer also read something computed from the image before it (a skip connection around the layer): then
`NotSeparable` says why, and the caller falls back to full forward passes.
"""

from __future__ import annotations

from torch import fx, nn

from probescope.core.errors import first_line


class NotSeparable(Exception):
    """The tail after this layer cannot be built from the model's modules; the message says why (one line)."""


class _LayerAsLeaf(fx.Tracer):
    """torch.fx's tracer, with `layer` kept as one call (not traced into), so that its output is one node."""

    def __init__(self, layer: str) -> None:
        super().__init__()
        self.layer = layer

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return qualname == self.layer or super().is_leaf_module(m, qualname)


def split_tail(module: nn.Module, layer: str) -> fx.GraphModule:
    """The module computing `module`'s output from the output of `layer`'s last call in the forward pass (the call
    whose output activation extraction keeps). Raises NotSeparable."""
    try:
        graph = _LayerAsLeaf(layer).trace(module)
    except Exception as exc:  # noqa: BLE001  (tracing runs the model's own code: any failure means no tail)
        raise NotSeparable(f"its forward pass cannot be traced ({first_line(exc)})") from None
    nodes = list(graph.nodes)
    calls = [n for n in nodes if n.op == "call_module" and n.target == layer]
    if not calls:
        raise NotSeparable(f"layer {layer!r} does not run as a module call in the traced forward pass")
    start = calls[-1]
    after = {start}  # the nodes computed from the layer's output
    from_input = set()  # the nodes computed from the image (before or around the layer)
    for n in nodes:
        if n.op == "placeholder":
            from_input.add(n)
        elif n is not start:
            inputs = n.all_input_nodes
            if any(i in after for i in inputs):
                after.add(n)
            if any(i in from_input for i in inputs):
                from_input.add(n)
    output = next(n for n in nodes if n.op == "output")
    if output not in after:
        raise NotSeparable(f"the model's output does not depend on layer {layer!r}")

    tail = fx.Graph()
    env: dict[fx.Node, fx.Node] = {start: tail.placeholder("activations")}

    def copy(n: fx.Node) -> fx.Node:
        if n not in env:
            if n not in after and n in from_input:
                raise NotSeparable(f"the network after {layer!r} also reads {n.name!r}, computed from the image "
                                   "before the layer (a connection around it)")
            env[n] = tail.node_copy(n, copy)  # constants (parameters, buffers) are copied where first needed
        return env[n]

    for n in nodes:
        if n in after and n is not start:
            copy(n)
    out = fx.GraphModule(module, tail, class_name="Tail")
    out.graph.eliminate_dead_code()
    out.recompile()
    return out.eval()


def describe(tail: fx.GraphModule) -> str:
    """'avgpool → flatten → fc': the tail's operations in order, for reports."""
    steps = []
    for n in tail.graph.nodes:
        if n.op == "call_module":
            steps.append(str(n.target))
        elif n.op in ("call_function", "call_method"):
            steps.append(getattr(n.target, "__name__", str(n.target)))
    return " → ".join(steps) or "identity"
