"""First call of one contender on one workload, in a fresh Python process.

    python benchmarks/first_call.py WORKLOAD METHOD ARGS.pkl   (prints one JSON line)

Every contender starts the same way: a new interpreter, the library imported (timed apart as
"import"), the user's file imported, the arguments unpickled and converted to the library's
types (not timed). The first call is then timed: making the gradient function (``gradgen.grad``,
``jax.jit(jax.grad(f))``, ...) and its first run to a finished result. For the hand-written
gradient that is its first run, NumPy's one-time costs included (the first use of each ufunc
loop and of BLAS happens inside it, since unpickling arrays runs no arithmetic). gradgen's
first call is split by stage (stages.py). The gradient is checked against the hand-written one
after the timing.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def measure(workload_key: str, method_key: str, args_path: str) -> dict:
    t0 = time.perf_counter()
    import methods
    import numpy  # noqa: F401 - every contender needs NumPy for its inputs: not "import" time
    import workloads
    numpy_import = time.perf_counter() - t0

    w, method = workloads.BY_KEY[workload_key], methods.BY_KEY[method_key]
    t0 = time.perf_counter()
    method.setup()
    library_import = time.perf_counter() - t0
    fn = w.function()
    with open(args_path, "rb") as f:
        args = pickle.load(f)
    prepared = method.prepare(w, args)

    timer = None
    if method_key == "gradgen":
        from stages import StageTimer

        timer = StageTimer().__enter__()
    gc.collect()
    c0, t0 = time.process_time(), time.perf_counter()
    result = method.make(w, fn)(*prepared)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"wall": wall, "cpu": cpu, "import": library_import, "numpy_import": numpy_import}
    if timer is not None:
        timer.__exit__(None, None, None)
        out["stages"] = timer.split(wall)
        out["missing_stages"] = timer.missing
    out["agrees"] = bool(workloads.same_gradient(method.to_numpy(result), w.hand(*args)))
    return out


def run_fresh(workload_key: str, method_key: str, args_path: Path, timeout: float) -> dict:
    """``measure`` in a new interpreter that imports the same gradgen as this one."""
    import gradgen

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(gradgen.__file__).resolve().parent.parent),
                    env.get("PYTHONPATH")) if p)
    try:
        proc = subprocess.run(
            [sys.executable, str(HERE / "first_call.py"), workload_key, method_key,
             str(args_path)], capture_output=True, text=True, env=env, timeout=timeout,
            check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:.0f} s"}
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["(no output)"]
        return {"error": lines[-1][:160]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    print(json.dumps(measure(*sys.argv[1:4])))
