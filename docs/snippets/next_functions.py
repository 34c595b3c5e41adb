"""PyTorch's grad_fn.next_functions and AccumulateGrad, as gradgen's graph shows them."""
import gradgen
from examples.add_mul import f

graph = gradgen.trace(f, 2.0, 3.0, 4.0)
e = graph.find("e")
print("e =", e.op.name, "of", [(node.name, index) for node, index in e.next_functions])
c = graph.find("c")
print("c =", c.op.name, "of", [(node.name, index) for node, index in c.next_functions])
print("leaves (AccumulateGrad in PyTorch):", [node.name for node in graph.leaves])
