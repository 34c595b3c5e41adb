"""A custom Function with two outputs: the backward receives one gradient per output, in
output order; an output that does not reach the loss receives zeros."""
import gradgen


class DoubleTriple(gradgen.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * 2, a * 3

    @staticmethod
    def backward(ctx, grad1, grad2):
        return grad1 * 2 + grad2 * 3


def f(a):
    b, c = DoubleTriple.apply(a)  # noqa: RUF059 - c is unused on purpose: it gets zeros
    return b
