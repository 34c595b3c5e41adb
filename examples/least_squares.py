"""Ridge regression solved in closed form, differentiated through np.linalg.solve.

coef = solve(X.T @ X + lam * I, X.T @ y) and the loss is the squared error of the fitted
predictions on held-out data (X_val, y_val). The gradient with respect to lam (argnums 1) is
what a hyperparameter search on the validation error follows; with respect to X (argnums 0)
it says how each training input moves the validation error:

    gradgen emit examples/least_squares.py:val_loss --argnums 0,1 --args "(np.random.default_rng(0).normal(size=(8, 3)), 0.5, np.random.default_rng(1).normal(size=8), np.random.default_rng(2).normal(size=(4, 3)), np.random.default_rng(3).normal(size=4))"

In Python: ``gradgen.grad(val_loss, argnums=(0, 1))(*example_args())``.
"""

import numpy as np


def ridge(X, lam, y):
    d = X.shape[1]
    return np.linalg.solve(X.T @ X + lam * np.eye(d), X.T @ y)


def val_loss(X, lam, y, X_val, y_val):
    coef = ridge(X, lam, y)
    return np.mean((X_val @ coef - y_val) ** 2)


def example_args(n=8, d=3, n_val=4):
    """(X, lam, y, X_val, y_val): a noisy linear model split into training and validation."""
    rng = np.random.default_rng(0)
    true_coef = rng.normal(size=d)
    X = rng.normal(size=(n, d))
    y = X @ true_coef + 0.3 * rng.normal(size=n)
    X_val = rng.normal(size=(n_val, d))
    y_val = X_val @ true_coef + 0.3 * rng.normal(size=n_val)
    return X, 0.5, y, X_val, y_val
