"""scipy.special's logsumexp, softmax, log_softmax and expit, spelled with NumPy rows (the
emitted module imports NumPy only), reached however the user's code names them; any other
SciPy function on traced values is refused by name with its NumPy spelling."""

from __future__ import annotations

import numpy as np
import pytest

import gradgen

from .conftest import assert_gradient

scipy_special = pytest.importorskip("scipy.special")
import scipy  # (after the skip: SciPy is optional)
from scipy.special import expit, log_softmax, logsumexp, softmax

RNG = np.random.default_rng(3)
A = RNG.normal(size=(3, 4))
W = np.linspace(0.5, 1.5, 12).reshape(3, 4)


def lse_all(a):
    return logsumexp(a)


def lse_rows(a):
    return np.sum(logsumexp(a, axis=1) * W[:, 0])


def lse_weighted_kept(a):
    return np.sum(logsumexp(a, axis=0, keepdims=True, b=W))


def expit_sum(a):
    return np.sum(expit(a) * W)


def softmax_rows(a):
    return np.sum(softmax(a, axis=1) * W)


def log_softmax_last(a):
    return np.sum(log_softmax(a, axis=-1) * W)


def module_attribute(a):
    return scipy_special.logsumexp(a * 2) + np.sum(scipy.special.expit(a) ** 2)


@pytest.mark.parametrize("f", [lse_all, lse_rows, lse_weighted_kept, expit_sum, softmax_rows,
                               log_softmax_last, module_attribute])
def test_scipy_special_functions_as_numpy_rows(f):
    assert_gradient(f, A)
    assert gradgen.value_and_grad(f)(A)[0] == pytest.approx(f(A), rel=1e-13)
    code = [line.split("#")[0] for line in gradgen.emit(f, A).splitlines()]
    assert not [line for line in code if "scipy" in line]  # NumPy only


def test_logsumexp_passes_no_gradient_through_its_shift():
    def loss(w, x, y):
        return -np.mean(log_softmax(x @ w, axis=1)[np.arange(len(y)), y])

    w, x, y = RNG.normal(size=(4, 3)), RNG.normal(size=(5, 4)), np.array([0, 1, 2, 1, 0])
    source = gradgen.emit(loss, w, x, y)
    backward = source.split("def loss_grad")[1].split("seed")[1].split("return")[0]
    assert "max_" not in backward  # the gradient is the softmax: nothing through the max
    report = gradgen.check(lambda w: loss(w, x, y), w)
    assert all(r.method in ("proved", "sympy") for r in report.results), report.table()


def test_other_scipy_functions_are_refused_with_their_numpy_spelling():
    with pytest.raises(gradgen.UnsupportedOperation, match=r"scipy.special.xlogy.*np.where"):
        gradgen.grad(lambda x: np.sum(scipy_special.xlogy(x, x)))(np.ones(3))
    with pytest.raises(gradgen.UnsupportedOperation, match=r"erf .*math.erf"):
        gradgen.grad(lambda x: np.sum(scipy_special.erf(x)))(np.ones(3))
    with pytest.raises(gradgen.UnsupportedOperation, match="return_sign"):
        gradgen.grad(lambda x: logsumexp(x, return_sign=True)[0])(np.ones(3))
