"""A rolled loop's backward computes a carry's next adjoint after the last statement that
reads the old one, so it goes straight into the carry's variable: the pendulum's trip ends
``grad_theta = ... + grad_theta``, not ``grad_theta_1 = ...`` then a copy back."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from .conftest import assert_gradient
from .test_loops import pendulum  # (benchmarks/loops.py's)


def symplectic(theta0, omega0, dt, n):
    """Each carry's update reads the other's old value: neither may move past the other."""
    theta, omega = theta0, omega0
    for _ in range(n):
        omega = omega - dt * math.sin(theta) * theta
        theta = theta + dt * omega * omega
    return theta * omega


def written(x, w):
    """The body writes into an array between the old value's read and the update."""
    h = 0.3
    hs = np.zeros(40)
    for t in range(40):
        hs[t] = h * w
        h = math.tanh(h * x[t] + w * hs[t])
    return h + hs.sum()


def _backward_loop(source: str, name: str) -> str:
    body = source[source.index(f"def {name}_grad("):].split("\n\n\n")[0]
    return body[body.index("in reversed(range("):]


def test_the_pendulums_carry_is_updated_in_place():
    args = (0.5, 0.1, 0.01, 200)
    _, source = assert_gradient(pendulum, *args, argnums=(0, 1, 2), rtol=1e-5)
    loop = _backward_loop(source, "pendulum")
    assert "grad_theta_1" not in loop and not re.search(r"grad_\w+ = grad_\w+\n", loop), loop
    lines = [line.strip() for line in loop.splitlines()]
    update = next(k for k, line in enumerate(lines) if line.startswith("grad_theta = "))
    read = next(k for k, line in enumerate(lines) if line.startswith("grad_dt += "))
    assert read < update  # the old grad_theta is read first


@pytest.mark.parametrize("fn, args, argnums", [
    (symplectic, (0.4, 0.7, 0.01, 120), (0, 1, 2)),
    (written, (np.linspace(-1.0, 1.0, 40), 0.6), (0, 1)),
])
def test_updates_that_must_stay_keep_their_gradients(fn, args, argnums):
    _, source = assert_gradient(fn, *args, argnums=argnums, rtol=1e-5)
    assert "in reversed(range(" in source  # (the loop stayed a loop)
