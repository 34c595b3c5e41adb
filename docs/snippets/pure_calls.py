"""Nothing accumulates across calls: every call of a gradient is a pure function."""
import gradgen
from examples.reused_value import f

df = gradgen.grad(f)
print(df(2.0), df(2.0), df(2.0))
