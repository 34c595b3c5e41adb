"""Logistic regression over more rows than one chunk holds: the gradient module is emitted
once against the array API standard, then runs on Dask arrays chunked by rows. Dask sums the
per-chunk work lazily; nothing is gathered until ``compute()``.

    gradgen emit examples/dask_logistic.py:loss --target array-api \\
        --arg w=f64[8] --arg X=f64[200000,8] --arg y=f64[200000] -o logistic_grad.py

On a cluster, start a ``dask.distributed.Client`` before computing (see ``main``); the module
does not change. The same file runs on NumPy, PyTorch and JAX arrays (also under jax.jit).
Run this script: ``python examples/dask_logistic.py`` (needs gradgen, dask, array-api-compat
and array-api-extra).
"""

import numpy as np


def loss(w, X, y):
    z = X @ w
    # log(1 + exp(z)) - y z, written to stay finite for large |z|
    softplus = np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0.0)
    return np.mean(softplus - y * z) + 1e-3 * np.sum(w * w)


def data(n=200_000, d=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    w_true = rng.normal(size=d)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-X @ w_true))).astype(np.float64)
    return np.zeros(d), X, y


def main(n=200_000, d=8, chunk_rows=50_000, client=None):
    """Emit, load and run the module on Dask arrays; returns (loss, gradient) as NumPy."""
    import dask.array as da

    import gradgen

    w, X, y = data(n, d)
    source = gradgen.emit(loss, w, X, y, target="array-api")  # traced once, on NumPy arrays
    module: dict = {}
    exec(compile(source, "logistic_grad.py", "exec"), module)  # noqa: S102 - or write a file

    X_lazy = da.from_array(X, chunks=(chunk_rows, d))  # in practice: da.from_zarr(...) etc.
    y_lazy = da.from_array(y, chunks=chunk_rows)
    w_lazy = da.from_array(w)  # every array argument from one library (one namespace)
    value, grad = module["loss_value_and_grad"](w_lazy, X_lazy, y_lazy)
    if client is not None:  # dask.distributed: the graph runs on the cluster's workers
        value, grad = client.compute([value, grad], sync=True)
    else:
        value, grad = da.compute(value, grad)
    return float(value), np.asarray(grad)


if __name__ == "__main__":
    value, grad = main()
    print(f"loss {value:.6f}")
    print("gradient", np.array2string(grad, precision=6))
