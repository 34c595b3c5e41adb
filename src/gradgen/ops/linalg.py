"""Linear algebra: products (matmul, tensordot, einsum, kron, cross, outer), diagonals and
triangles, and np.linalg's solvers and decompositions, each with its VJP.

Conventions (JAX's and PyTorch's):
- np.linalg.cholesky, eigh and eigvalsh read one triangle of their input, as LAPACK does: the
  lower one (the upper one with ``upper=True`` / ``UPLO='U'``). Their gradient is the
  derivative of what NumPy computes, so it lands on that triangle only (the other triangle
  does not change the result).
- eigh and eigvalsh assume distinct eigenvalues, svd distinct nonzero singular values (their
  rules divide by the gaps); svd's and pinv's rules assume full rank; inv, solve, det and
  slogdet an invertible matrix (their rules go through inv and solve).
- An eigenvector or singular vector has the sign LAPACK gives it; the rules hold for that
  sign, whichever it is (it does not change between nearby inputs).
- Rows have one output, so NumPy's named tuples are one row per part: ``w, v =
  np.linalg.eigh(a)`` traces eigvalsh and eigh_vectors, ``sign, logdet = np.linalg.slogdet(a)``
  traces slogdet_sign (whose derivative is zero) and slogdet (the log of |det|); the emitted
  module calls LAPACK once per part that is used.
"""

from __future__ import annotations

import functools
import operator
import string

import numpy as np

from .. import abstract
from ._sym import sp
from .adapt import refuse
from .arrays import _value, broadcast_to, reshape, sum_, transpose
from .core import cast
from .index import scatter
from .registry import PREC_ADD, PREC_MUL, Domain, Expr, defop, infix, route, value_text

REALS = (-2.0, 2.0)
_NUMPY2 = int(np.__version__.split(".")[0]) >= 2


def _shape(x) -> tuple[int, ...]:
    return tuple(np.shape(_value(x)))


def _ndim(x) -> int:
    return np.ndim(_value(x))


def _dtype(x) -> str:
    return np.result_type(_value(x)).name


def _transposed(x, order):
    """``np.transpose(x, order)``, or ``x`` itself when ``order`` keeps every axis."""
    order = tuple(int(i) for i in order)
    if order == tuple(range(len(order))):
        return x
    return transpose(x, axes=None if order == tuple(reversed(range(len(order)))) else order)


def _swap_last(x):
    """The matrix transpose of a (stack of) matrices: ``x.T`` or ``np.swapaxes(x, -1, -2)``."""
    n = _ndim(x)
    return _transposed(x, tuple(range(n - 2)) + (n - 1, n - 2))


_mT = _swap_last


def _row(v):
    """A stack of vectors (..., k) as rows (..., 1, k): ``m * _row(v)`` scales m's columns."""
    s = _shape(v)
    return reshape(v, shape=s[:-1] + (1, s[-1]))


def _col(v):
    """A stack of vectors (..., k) as columns (..., k, 1)."""
    return reshape(v, shape=_shape(v) + (1,))


def _unsqueeze2(x):
    """A stack of numbers (...) as (..., 1, 1): one per matrix."""
    return reshape(x, shape=_shape(x) + (1, 1))


def _printer(fn: str, keys=(), defaults=None, suffix=""):
    """``fn(inputs..., key=value...)`` for the attributes that differ from ``defaults``."""
    defaults = defaults or {}

    def print_call(node, args):
        parts = [a.text for a in args]
        for key in keys:
            value = node.attrs.get(key)
            if key in defaults and value == defaults[key]:
                continue
            parts.append(f"{key}={value_text(value)}")
        return Expr(f"{fn}({', '.join(parts)}){suffix}")

    return print_call


# --- sympy meanings of matrix functions ----------------------------------------------------


def _as_matrix(x):
    return sp.Matrix(np.asarray(x, dtype=object).tolist())


def _to_object(r):
    if isinstance(r, sp.MatrixBase):
        return np.array(r.tolist(), dtype=object).reshape(r.shape)
    if isinstance(r, list | tuple):
        out = np.empty(len(r), dtype=object)
        out[:] = r
        return out
    out = np.empty((), dtype=object)
    out[()] = r
    return out


def _assemble(batch, parts):
    if not batch:
        return parts[0] if parts[0].shape else parts[0][()]
    out = np.empty(tuple(batch) + parts[0].shape, dtype=object)
    for idx, part in zip(np.ndindex(*batch), parts, strict=True):
        out[idx] = part if part.shape else part[()]  # a number, not a 0-d array, per matrix
    return out


def _stacked(fn, x):
    """``fn`` (sympy Matrix -> Matrix, list or number) on each matrix of (..., m, n)."""
    x = np.asarray(x, dtype=object)
    batch = x.shape[:-2]
    return _assemble(batch, [_to_object(fn(_as_matrix(x[idx]))) for idx in np.ndindex(*batch)])


def _symmetric(m, uplo):
    """The symmetric matrix LAPACK sees when it reads the ``uplo`` triangle of ``m``."""
    n = m.shape[0]
    if uplo == "L":
        return sp.Matrix(n, n, lambda i, j: m[max(i, j), min(i, j)])
    return sp.Matrix(n, n, lambda i, j: m[min(i, j), max(i, j)])


def _closed_eigh2(a, b, d, sqrt, hypot):
    """Eigenvalues (ascending) and unit eigenvectors of [[a, b], [b, d]]: the eigenvector of
    w is (w - d, b) normalised. Shared by the sympy meaning and its numeric sign check."""
    mid, rad = (a + d) / 2, hypot((a - d) / 2, b)
    w = [mid - rad, mid + rad]
    vecs = []
    for lam in w:
        norm = hypot(lam - d, b)
        vecs.append(((lam - d) / norm, b / norm))
    return w, vecs


def _canonical_eigh(s: np.ndarray):
    """Numerically, the eigenvectors the sympy meaning of a symmetric ``s`` writes down."""
    n = s.shape[0]
    if n == 1:
        return s[0:1, 0].copy(), np.ones((1, 1))
    if n == 2:
        w, vecs = _closed_eigh2(s[0, 0], s[1, 0], s[1, 1], np.sqrt, np.hypot)
        return np.array(w), np.array(vecs).T
    return np.linalg.eigh(s)


@functools.lru_cache(maxsize=4096)
def _numeric_sign(kind: int, j: int, rows: int, cols: int, entries: tuple) -> int:
    """+1 or -1: whether LAPACK's vector j points like the meaning's closed-form one. Kind 0
    (3): eigenvector j of the symmetric matrix ``entries`` read from its lower (upper)
    triangle; kind 1: its left singular vector j (from m @ m.T, for rows <= cols); kind 2:
    its right singular vector j (from m.T @ m)."""
    x = np.array(entries, dtype=float).reshape(rows, cols)
    if kind in (0, 3):
        ref = np.linalg.eigh(x, UPLO="L" if kind == 0 else "U")[1][:, j]
        canon = _canonical_eigh(x)[1][:, j]
    else:
        k = min(rows, cols)
        u, _, vh = np.linalg.svd(x, full_matrices=False)
        ref = u[:, j] if kind == 1 else vh[j]
        canon = _canonical_eigh(x @ x.T if kind == 1 else x.T @ x)[1][:, k - 1 - j]
    return 1 if float(ref @ canon) >= 0 else -1


@functools.cache
def _lapack_sign():
    """A sympy function worth +1 or -1 at a point: the sign LAPACK gives a vector relative to
    the closed form. It is constant near the point, so its derivative is 0."""

    class lapack_sign(sp.Function):
        @classmethod
        def eval(cls, *args):
            if all(a.is_Number for a in args):
                kind, j, rows, cols, *entries = args
                return sp.Integer(_numeric_sign(int(kind), int(j), int(rows), int(cols),
                                                tuple(float(e) for e in entries)))
            return None

        def fdiff(self, argindex=1):
            return sp.S.Zero

    lapack_sign._imp_ = staticmethod(
        lambda kind, j, rows, cols, *entries: float(_numeric_sign(
            int(kind), int(j), int(rows), int(cols), tuple(float(e) for e in entries))))
    return lapack_sign


def _lower_pairs(n):
    return [(i, j) for i in range(n) for j in range(i + 1)]


_UPLO = ("L", "U")  # the triangle LAPACK reads, as a number a sympy function can carry


@functools.lru_cache(maxsize=1024)
def _numeric_eigh(n: int, u: int, lower: tuple):
    """LAPACK's eigh of the symmetric matrix with this lower triangle, reading triangle
    _UPLO[u] (the two give eigenvectors of different signs)."""
    s = np.zeros((n, n))
    for (i, j), v in zip(_lower_pairs(n), lower, strict=True):
        s[i, j] = s[j, i] = v
    return np.linalg.eigh(s, UPLO=_UPLO[u])


@functools.cache
def _implicit_eigh():
    """sympy functions for the eigenvalues and eigenvectors of an n x n symmetric matrix given
    by its lower triangle (n > 2, where no closed form is practical): evaluated by LAPACK at a
    point, differentiated by first-order perturbation theory (distinct eigenvalues)."""

    class eigh_value(sp.Function):  # (n, u, k, *lower): eigenvalue k
        @classmethod
        def eval(cls, n, u, k, *lower):
            if all(e.is_Number for e in lower):
                return sp.Float(_value_at(n, u, k, *lower), 17)
            return None

        def fdiff(self, argindex=1):
            n, u, k, *lower = self.args
            if argindex < 4:
                return sp.S.Zero
            p, q = _lower_pairs(int(n))[argindex - 4]
            vp, vq = eigh_vector(n, u, p, k, *lower), eigh_vector(n, u, q, k, *lower)
            return vp * vp if p == q else 2 * vp * vq

    class eigh_vector(sp.Function):  # (n, u, i, k, *lower): component i of eigenvector k
        @classmethod
        def eval(cls, n, u, i, k, *lower):
            if all(e.is_Number for e in lower):
                return sp.Float(_vector_at(n, u, i, k, *lower), 17)
            return None

        def fdiff(self, argindex=1):
            n, u, i, k, *lower = self.args
            if argindex < 5:
                return sp.S.Zero
            p, q = _lower_pairs(int(n))[argindex - 5]

            def v(r, c):
                return eigh_vector(n, u, r, c, *lower)

            total = sp.S.Zero
            for m in range(int(n)):
                if m == int(k):
                    continue
                coupling = v(p, m) * v(p, k) if p == q else v(p, m) * v(q, k) + v(q, m) * v(p, k)
                gap = eigh_value(n, u, k, *lower) - eigh_value(n, u, m, *lower)
                total += v(i, m) * coupling / gap
            return total

    eigh_value._imp_ = staticmethod(_value_at)
    eigh_vector._imp_ = staticmethod(_vector_at)
    return eigh_value, eigh_vector


def _value_at(n, u, k, *lower) -> float:
    return float(_numeric_eigh(int(n), int(u), _floats(lower))[0][int(k)])


def _vector_at(n, u, i, k, *lower) -> float:
    return float(_numeric_eigh(int(n), int(u), _floats(lower))[1][int(i), int(k)])


def _floats(items) -> tuple:
    return tuple(float(e) for e in items)


def _sym_eigh(s, uplo="L"):
    """(eigenvalues ascending, eigenvectors as columns) of a symmetric sympy Matrix, with the
    signs LAPACK gives the eigenvectors when it reads the ``uplo`` triangle."""
    n = s.shape[0]
    u = _UPLO.index(uplo)
    if n == 1:
        return [s[0, 0]], sp.Matrix([[1]])
    if n == 2:
        w, vecs = _closed_eigh2(s[0, 0], s[1, 0], s[1, 1], sp.sqrt,
                                lambda x, y: sp.sqrt(x * x + y * y))
        sign = _lapack_sign()
        entries = list(s)
        cols = [sp.Matrix(vecs[j]) * sign(3 * u, j, 2, 2, *entries) for j in range(2)]
        return w, sp.Matrix.hstack(*cols)
    value, vector = _implicit_eigh()
    lower = [s[i, j] for i, j in _lower_pairs(n)]
    w = [value(n, u, k, *lower) for k in range(n)]
    return w, sp.Matrix(n, n, lambda i, k: vector(n, u, i, k, *lower))


def _sym_gram_eigh(g):
    """The eigen-decomposition of a Gram matrix for svd's meaning, with closed-form (unsigned)
    eigenvectors up to 2 x 2: the singular vectors' signs are set afterwards."""
    n = g.shape[0]
    if n == 1:
        return [g[0, 0]], sp.Matrix([[1]])
    if n == 2:
        w, vecs = _closed_eigh2(g[0, 0], g[1, 0], g[1, 1], sp.sqrt,
                                lambda x, y: sp.sqrt(x * x + y * y))
        return w, sp.Matrix.hstack(*[sp.Matrix(v) for v in vecs])
    return _sym_eigh(g)


def _sym_svd(m, part):
    """svd(m, full_matrices=False)'s ``part`` ("u", "s" or "vh"): the factor on m's shorter
    side (both for a square m) from the eigenvectors of its Gram matrix (m @ m.T for U, m.T @ m
    for V), with LAPACK's signs; s = sqrt(eigenvalues), descending; the factor on the longer
    side is m v / s (or m.T u / s)."""
    rows, cols = m.shape
    k = min(rows, cols)
    order = list(range(k))[::-1]
    sign = _lapack_sign()
    entries = list(m)

    def factor(kind):
        w, vecs = _sym_gram_eigh(m * m.T if kind == 1 else m.T * m)
        e = sp.Matrix.hstack(*[vecs[:, j] * sign(kind, i, rows, cols, *entries)
                               for i, j in enumerate(order)])
        return [sp.sqrt(w[j]) for j in order], e

    if part == "s":
        return factor(1 if rows <= cols else 2)[0]
    if part == "u":
        if rows <= cols:
            return factor(1)[1]
        s, v = factor(2)
        return m * v * sp.diag(*[1 / x for x in s])
    if rows >= cols:
        return factor(2)[1].T
    s, u = factor(1)
    return (m.T * u * sp.diag(*[1 / x for x in s])).T


# --- matmul and outer ------------------------------------------------------------------------


def _matmul_vjp_a(g, ans, a, b):
    na, nb = _ndim(a), _ndim(b)
    if na == 1 and nb == 1:
        return g * b
    if na == 1 and nb == 2:
        return matmul(b, g)
    if na == 2 and nb == 1:
        return outer(g, b)
    if na == 2 and nb == 2:
        return matmul(g, _swap_last(b))
    return _matmul_vjp_batched(g, a, b)[0]


def _matmul_vjp_b(g, ans, a, b):
    na, nb = _ndim(a), _ndim(b)
    if na == 1 and nb == 1:
        return g * a
    if na == 1 and nb == 2:
        return outer(a, g)
    if na == 2 and nb == 1:
        return matmul(g, a)
    if na == 2 and nb == 2:
        return matmul(_swap_last(a), g)
    return _matmul_vjp_batched(g, a, b)[1]


def _matmul_vjp_batched(g, a, b):
    """Stacked matmul: vectors become (1, n) and (n, 1) matrices; reverse mode sums the
    contributions over broadcast batch axes."""
    a_shape, b_shape = _shape(a), _shape(b)
    a2 = reshape(a, shape=(1,) + a_shape) if len(a_shape) == 1 else a
    b2 = reshape(b, shape=b_shape + (1,)) if len(b_shape) == 1 else b
    g_shape = np.broadcast_shapes(_shape(a2)[:-2], _shape(b2)[:-2]) + (
        _shape(a2)[-2], _shape(b2)[-1])
    g2 = reshape(g, shape=g_shape) if _shape(g) != g_shape else g
    ga = matmul(g2, _swap_last(b2))
    gb = matmul(_swap_last(a2), g2)
    if len(a_shape) == 1:  # (..., 1, n): the 1 is the promoted row
        ga = reshape(ga, shape=_shape(ga)[:-2] + a_shape)
    if len(b_shape) == 1:
        gb = reshape(gb, shape=_shape(gb)[:-2] + b_shape)
    return ga, gb


_MATMUL_CASES = tuple(
    ((sa, sb), {}) for sa, sb in [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                                  ((2, 2, 3), (3, 4)), ((3,), (2, 3, 4)), ((2, 3, 4), (4,)),
                                  ((2, 1, 2, 3), (3, 3, 2))])

def _matmul_abstract(op, a, b):
    """``a @ b`` on shapes: a 1-d operand loses its axis, batch axes broadcast."""
    sa, sb = np.shape(a), np.shape(b)
    if not sa or not sb or sa[-1] != sb[-2 if len(sb) > 1 else -1]:
        return None  # NumPy refuses: let it say so
    if len(sa) == 1 and len(sb) == 1:
        shape = ()
    elif len(sa) == 1:
        shape = sb[:-2] + sb[-1:]
    elif len(sb) == 1:
        shape = sa[:-1]
    else:
        shape = np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    return _product_abstract(op, a, b, shape)


def _product_abstract(op, a, b, shape):
    found = abstract.result_kind(op, (a, b), {})
    return None if found is None else abstract.make(shape, *found)


matmul = defop(
    "matmul", operator.matmul, infix("@", PREC_MUL), vjp=(_matmul_vjp_a, _matmul_vjp_b),
    sympy=lambda a, b: np.matmul(a, b), domain=Domain((REALS, REALS), cases=_MATMUL_CASES),
    binds=(np.matmul,), abstract=_matmul_abstract,
    rule_text=("d(A @ B)/dA: G @ B.T (summed over broadcast batch axes)",
               "d(A @ B)/dB: A.T @ G (summed over broadcast batch axes)"))

outer = defop(
    "outer", np.outer, _printer("np.outer"),
    vjp=(lambda g, ans, a, b: matmul(g, b), lambda g, ans, a, b: matmul(a, g)),
    sympy=lambda a, b: np.outer(a, b),
    abstract=lambda op, a, b: _product_abstract(op, a, b, (np.size(a), np.size(b))),
    domain=Domain((REALS, REALS), cases=((((3,), (2,)), {}), (((1,), (4,)), {}))),
    rule_text=("d outer(u, v)/du: G @ v", "d outer(u, v)/dv: u @ G"))


# --- tensordot -------------------------------------------------------------------------------


def _free(n, axes):
    return tuple(i for i in range(n) if i not in axes)


def _pair(axes, na, nb):
    """The ``axes`` attribute (an int n: a's last n axes with b's first n, or a pair of
    tuples) as a pair of tuples."""
    if isinstance(axes, int):
        return tuple(range(na - axes, na)), tuple(range(axes))
    return axes


def _td(a, b, axes_a, axes_b):
    """tensordot over these axes, with NumPy's int form where it says the same thing."""
    na, n = _ndim(a), len(axes_a)
    simple = axes_a == tuple(range(na - n, na)) and axes_b == tuple(range(n))
    return tensordot(a, b, axes=n if simple else (axes_a, axes_b))


def _tensordot_vjp_a(g, ans, a, b, axes):
    axes_a, axes_b = _pair(axes, _ndim(a), _ndim(b))
    free_a, free_b = _free(_ndim(a), axes_a), _free(_ndim(b), axes_b)
    k = len(free_a)
    raw = _td(g, b, tuple(range(k, k + len(free_b))), free_b)
    # raw's axes: a's free axes, then a's contracted axes in the order b holds their partners
    order = list(free_a) + [axes_a[axes_b.index(j)] for j in sorted(axes_b)]
    return _transposed(raw, np.argsort(order))


def _tensordot_vjp_b(g, ans, a, b, axes):
    axes_a, axes_b = _pair(axes, _ndim(a), _ndim(b))
    free_a, free_b = _free(_ndim(a), axes_a), _free(_ndim(b), axes_b)
    raw = _td(a, g, free_a, tuple(range(len(free_a))))
    order = [axes_b[axes_a.index(i)] for i in sorted(axes_a)] + list(free_b)
    return _transposed(raw, np.argsort(order))


def _print_tensordot(node, args):
    axes = node.attrs["axes"]
    text = str(axes) if isinstance(axes, int) else repr(tuple(tuple(x) for x in axes))
    return Expr(f"np.tensordot({args[0].text}, {args[1].text}, axes={text})")


tensordot = defop(
    "tensordot", lambda a, b, axes: np.tensordot(a, b, axes=axes), _print_tensordot,
    vjp=(_tensordot_vjp_a, _tensordot_vjp_b),
    sympy=lambda a, b, axes: np.tensordot(np.asarray(a, dtype=object),
                                          np.asarray(b, dtype=object), axes=axes),
    domain=Domain((REALS, REALS), cases=(
        (((2, 3), (3, 4)), {"axes": ((1,), (0,))}),
        (((2, 3, 2), (3, 2)), {"axes": ((1, 2), (0, 1))}),
        (((3, 2), (2, 3)), {"axes": ((0, 1), (1, 0))}),
        (((2, 3), (2,)), {"axes": ((0,), (0,))}),
        (((2,), (3,)), {"axes": ((), ())}),
        (((2, 3, 2), (3, 2, 2)), {"axes": 2}))),
    rule_text=("G contracted with B over B's free axes, axes put back in A's order",
               "A contracted with G over A's free axes, axes put back in B's order"))


# --- einsum ----------------------------------------------------------------------------------


def _einsum_terms(subscripts: str):
    lhs, out = subscripts.split("->")
    return lhs.split(","), out


def _einsum_vjp(k):
    """The VJP for operand k is another einsum: the cotangent with the other operands, summed
    to operand k's labels. A label repeated in operand k (a diagonal read, 'ii') is
    differentiated as the diagonal and embedded back; a label only operand k has (summed
    away) is broadcast back."""

    def rule(g, ans, *xs, subscripts, optimize=False):
        ins, out = _einsum_terms(subscripts)
        target, shape = ins[k], list(_shape(xs[k]))
        steps = []
        while len(set(target)) < len(target):
            letter = next(c for c in target if target.count(c) > 1)
            q = target.index(letter)
            p = target.index(letter, q + 1)
            steps.append((q, p, tuple(shape)))
            keep = [i for i in range(len(target)) if i not in (q, p)]
            target = "".join(target[i] for i in keep) + letter
            shape = [shape[i] for i in keep] + [shape[q]]
        others = [j for j in range(len(xs)) if j != k]
        available = set(out).union(*(set(ins[j]) for j in others))
        kept = "".join(c for c in target if c in available)
        if not others and out == kept:
            h = g
        else:
            subs = ",".join([out] + [ins[j] for j in others]) + "->" + kept
            h = einsum(g, *[xs[j] for j in others], subscripts=subs, optimize=optimize)
        h_shape = iter(_shape(h))
        sizes = tuple(next(h_shape) if c in available else 1 for c in target)
        if kept != target:
            h = reshape(h, shape=sizes)
        # a label summed away, or of size 1 where operand k has more (NumPy broadcasts it)
        full = tuple(n if d == 1 else d for d, n in zip(sizes, shape, strict=True))
        if full != sizes:
            h = broadcast_to(h, shape=full)
        for q, p, before in reversed(steps):
            h = _embed_diagonal(h, before, 0, q, p)
        return h

    return rule


class _EinsumRules(tuple):
    """One VJP rule per operand, however many there are."""

    def __getitem__(self, i):
        return _einsum_vjp(i)


def _einsum_impl(*xs, subscripts, optimize=False):
    return np.einsum(subscripts, *xs, optimize=optimize)


def _print_einsum(node, args):
    parts = [value_text(node.attrs["subscripts"]), *(a.text for a in args)]
    if node.attrs.get("optimize"):
        parts.append(f"optimize={value_text(node.attrs['optimize'])}")
    return Expr(f"np.einsum({', '.join(parts)})")


def _xp_einsum(node, args, scope):
    """One or two operands without a repeated label, from standard operations: a contraction
    with no shared kept label is ``xp.tensordot``; otherwise each operand is permuted and
    reshaped onto the labels (output first), multiplied and summed over the rest."""
    from ..dialects import refuse

    inputs, output = node.attrs["subscripts"].split("->")
    labels = inputs.split(",")
    if len(labels) > 2 or any(len(set(lab)) != len(lab) for lab in labels):
        refuse(node, f"np.einsum({node.attrs['subscripts']!r}) (more than two operands, or a "
               "diagonal) has no array-API form in gradgen yet")
    shapes = [r.aval.shape for r in node.inputs]
    if len(labels) == 2 and not set(labels[0]) & set(labels[1]) & set(output):
        shared = [c for c in labels[0] if c in labels[1]]
        kept = [c for c in labels[0] if c not in shared] + [c for c in labels[1]
                                                              if c not in shared]
        sizes_agree = all(shapes[0][labels[0].index(c)] == shapes[1][labels[1].index(c)]
                          for c in shared)
        if sizes_agree and sorted(kept) == sorted(output):
            axes = (tuple(labels[0].index(c) for c in shared),
                    tuple(labels[1].index(c) for c in shared))
            text = f"xp.tensordot({args[0].text}, {args[1].text}, axes={axes!r})"
            order = tuple(kept.index(c) for c in output)
            if order != tuple(range(len(order))):
                text = f"xp.permute_dims({text}, {order!r})"
            return Expr(text)
    every = list(output) + [c for lab in labels for c in lab if c not in output]
    every = list(dict.fromkeys(every))
    aligned = []
    for lab, shape, arg in zip(labels, shapes, args, strict=True):
        text = arg.text
        order = sorted(range(len(lab)), key=lambda i: every.index(lab[i]))
        if order != list(range(len(lab))):
            text = f"xp.permute_dims({text}, {tuple(order)!r})"
        full = tuple(shape[lab.index(c)] if c in lab else 1 for c in every)
        if len(full) != len(lab):
            text = f"xp.reshape({text}, {full!r})"
        aligned.append(text)
    product = " * ".join(aligned) if len(aligned) > 1 else aligned[0]
    summed = tuple(range(len(output), len(every)))
    if not summed:
        return Expr(product, PREC_MUL if len(aligned) > 1 else 16)
    axis = summed[0] if len(summed) == 1 else summed
    return Expr(f"xp.sum({product}, axis={axis!r})")


def _sym_einsum(*xs, subscripts, optimize=False):
    return np.einsum(subscripts, *[np.asarray(x, dtype=object) for x in xs])


einsum = defop(
    "einsum", _einsum_impl, _print_einsum, vjp=_EinsumRules((None,)), sympy=_sym_einsum,
    domain=Domain((REALS,), cases=(
        (((2, 3), (3, 4)), {"subscripts": "ij,jk->ik"}),
        (((3, 3),), {"subscripts": "ii->i"}),
        (((3, 3),), {"subscripts": "ii->"}),
        (((2, 3), (1, 3)), {"subscripts": "ij,ij->i"}),
        (((2,), (2, 3), (3,)), {"subscripts": "i,ij,j->"}),
        (((2, 2, 3),), {"subscripts": "iij->ji"}),
        (((2, 3), (4,)), {"subscripts": "ij,k->kj"}))),
    rule_text=(("operand i: the einsum of the cotangent with the other operands, to operand i's "
               "labels (a repeated label: the diagonal, zeros elsewhere; a label no other "
               "operand has: broadcast)"),),
    extra={"view": True},  # np.einsum('ii->i', a) is a view of a
    xp=_xp_einsum)


# --- diagonals and triangles -----------------------------------------------------------------


def _diag_len(n: int, m: int, offset: int) -> int:
    return max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))


def _embed_diagonal(g, shape, offset, axis1, axis2):
    """Zeros of ``shape`` holding ``g`` (shaped (..., L), or broadcastable to it) on the
    diagonal np.diagonal(x, offset, axis1, axis2) reads: that read's VJP. In C order the
    diagonal of an n x m matrix is every (m + 1)-th element of its flattening."""
    n, m = shape[axis1], shape[axis2]
    others = [i for i in range(len(shape)) if i not in (axis1, axis2)]
    lead = tuple(shape[i] for i in others)
    length = _diag_len(n, m, offset)
    if length == 0:
        return np.zeros(shape, _dtype(g))
    start = offset if offset >= 0 else -offset * m
    step = m + 1
    stop = start + (length - 1) * step + 1
    if len(range(start, n * m, step)) == length:
        stop = None
    flat = scatter(g, shape=lead + (n * m,), dtype=_dtype(g),
                   index=("...",) * bool(lead) + (("slice", start or None, stop, step),))
    y = reshape(flat, shape=lead + (n, m))
    return _transposed(y, np.argsort(others + [axis1, axis2]))


def _diagonal_impl(x, offset=0, axis1=0, axis2=1):
    return np.diagonal(x, offset, axis1, axis2)


def _xp_last_two(fn):
    """``xp.linalg.diagonal``/``trace``: the standard reads the last two axes only."""

    def print_(node, args, scope):
        ndim = node.inputs[0].aval.ndim
        axes = (node.attrs.get("axis1", 0) % ndim, node.attrs.get("axis2", 1) % ndim)
        if axes != (ndim - 2, ndim - 1):
            from ..dialects import refuse

            refuse(node, f"np.{fn} over axes {axes} (the array API's reads the last two)")
        offset = node.attrs.get("offset", 0)
        tail = f", offset={offset}" if offset else ""
        return Expr(f"xp.linalg.{fn}({args[0].text}{tail})")

    return print_


def _xp_add_eye(node, args, scope):
    n = node.aval.shape[-1]
    eye = f"xp.eye({n}, dtype={scope.dtype(node.aval.dtype)}, {scope.device()})"
    scale = node.attrs["scale"]
    if scale == 1.0:
        return Expr(f"{args[0].at(PREC_ADD)} + {eye}", PREC_ADD)
    if scale == -1.0:
        return Expr(f"{args[0].at(PREC_ADD)} - {eye}", PREC_ADD)
    return Expr(f"{args[0].at(PREC_ADD)} + {scale!r} * {eye}", PREC_ADD)


diagonal = defop(
    "diagonal", _diagonal_impl,
    _printer("np.diagonal", ("offset", "axis1", "axis2"), {"offset": 0, "axis1": 0, "axis2": 1}),
    vjp=(lambda g, ans, x, offset=0, axis1=0, axis2=1:
         _embed_diagonal(g, _shape(x), offset, axis1, axis2),),
    sympy=_diagonal_impl,
    domain=Domain((REALS,), cases=(
        (((3, 3),), {"offset": 0, "axis1": 0, "axis2": 1}),
        (((3, 4),), {"offset": 1, "axis1": 0, "axis2": 1}),
        (((4, 3),), {"offset": -1, "axis1": 0, "axis2": 1}),
        (((2, 3, 2),), {"offset": 0, "axis1": 2, "axis2": 0}))),
    rule_text=("the cotangent placed on the diagonal, zeros elsewhere",),
    extra={"view": "readonly"}, xp=_xp_last_two("diagonal"))


def _trace_impl(x, offset=0, axis1=0, axis2=1):
    return np.trace(x, offset, axis1, axis2)


def _trace_vjp(g, ans, x, offset=0, axis1=0, axis2=1):
    if _ndim(x) > 2:  # one number per trace: spread along its diagonal
        g = reshape(g, shape=_shape(g) + (1,))
    return _embed_diagonal(g, _shape(x), offset, axis1, axis2)


trace = defop(
    "trace", _trace_impl,
    _printer("np.trace", ("offset", "axis1", "axis2"), {"offset": 0, "axis1": 0, "axis2": 1}),
    vjp=(_trace_vjp,), sympy=_trace_impl,
    domain=Domain((REALS,), cases=(
        (((3, 3),), {"offset": 0, "axis1": 0, "axis2": 1}),
        (((2, 4),), {"offset": 1, "axis1": 0, "axis2": 1}),
        (((2, 3, 2),), {"offset": -1, "axis1": 0, "axis2": 2}))),
    rule_text=("d trace(A)/dA: the identity (ones on the traced diagonal)",),
    xp=_xp_last_two("trace"))


def _diag_impl(v, k=0):
    return np.diag(v, k)


diag = defop(
    "diag", _diag_impl, _printer("np.diag", ("k",), {"k": 0}),
    vjp=(lambda g, ans, v, k=0: diagonal(g, offset=k, axis1=0, axis2=1),),
    sympy=lambda v, k=0: np.diag(np.asarray(v, dtype=object), k),
    domain=Domain((REALS,), cases=((((3,),), {"k": 0}), (((2,),), {"k": -1}),
                                   (((2,),), {"k": 2}))),
    rule_text=("the diagonal of the cotangent",))


def _xp_triangle(name):
    """``xp.where(column - row <= k, x, 0)``: the triangle from index grids (no n x m
    constant in the module)."""

    def print_(node, args, scope):
        if node.inputs[0].aval.ndim < 2:
            from ..dialects import refuse

            refuse(node, f"np.{name} of a 1-d array (a repeated row)")
        n, m = node.aval.shape[-2:]
        k = node.attrs.get("k", 0)
        rows = f"xp.reshape(xp.arange({n}, {scope.device()}), ({n}, 1))"
        offset = f"xp.arange({m}, {scope.device()}) - {rows}"
        keep = f"{offset} <= {k}" if name == "tril" else f"{offset} >= {k}"
        return Expr(f"xp.where({keep}, {args[0].text}, xp.zeros_like({args[0].text}))")

    return print_


def _triangle(name, np_fn):
    def impl(x, k=0):
        return np_fn(x, k)

    row = defop(
        name, impl, _printer(f"np.{name}", ("k",), {"k": 0}),
        vjp=(lambda g, ans, x, k=0: row(g, k=k),), sympy=impl,
        domain=Domain((REALS,), cases=((((3, 3),), {"k": 0}), (((3, 4),), {"k": 1}),
                                       (((2, 2, 3),), {"k": -1}), (((3,),), {"k": 0}))),
        rule_text=((f"the cotangent's {'lower' if name == 'tril' else 'upper'} triangle "
                   "(a 1-d input is a row repeated: the columns summed)"),),
        xp=_xp_triangle(name))
    return row


tril = _triangle("tril", np.tril)
triu = _triangle("triu", np.triu)


def _print_add_eye(node, args):
    n = node.aval.shape[-1]
    dtype = node.aval.dtype
    eye = f"np.eye({n})" if dtype == np.float64 else f"np.eye({n}, dtype=np.{dtype.name})"
    scale = node.attrs["scale"]
    if scale == 1.0:
        return Expr(f"{args[0].at(PREC_ADD)} + {eye}", PREC_ADD)
    if scale == -1.0:
        return Expr(f"{args[0].at(PREC_ADD)} - {eye}", PREC_ADD)
    return Expr(f"{args[0].at(PREC_ADD)} + {scale!r} * {eye}", PREC_ADD)


def _add_eye_impl(x, scale):
    return x + scale * np.eye(np.shape(x)[-1], dtype=np.result_type(x))


# x + scale * I over the last two axes: how rules write "1 / gap, 0 on the diagonal" without
# a constant n x n array in the module.
add_eye = defop(
    "add_eye", _add_eye_impl, _print_add_eye, vjp=(lambda g, ans, x, scale: g,),
    sympy=lambda x, scale: x + scale * np.eye(np.shape(x)[-1], dtype=int),
    domain=Domain((REALS,), cases=((((3, 3),), {"scale": 1.0}),
                                   (((2, 2, 2),), {"scale": -1.0}))),
    rule_text=("the cotangent",), xp=_xp_add_eye)


# --- kron and cross --------------------------------------------------------------------------


def _kron_vjp(i):
    def rule(g, ans, a, b):
        sa, sb = _shape(a), _shape(b)
        n = len(sa)
        g = reshape(g, shape=tuple(d for pair in zip(sa, sb, strict=True) for d in pair))
        la, lb = string.ascii_lowercase[:n], string.ascii_uppercase[:n]
        g_sub = "".join(x + y for x, y in zip(la, lb, strict=True))
        if i == 0:
            return einsum(g, b, subscripts=f"{g_sub},{lb}->{la}")
        return einsum(g, a, subscripts=f"{g_sub},{la}->{lb}")

    return rule


kron = defop(
    "kron", np.kron, _printer("np.kron"), vjp=(_kron_vjp(0), _kron_vjp(1)),
    sympy=lambda a, b: np.kron(np.asarray(a, dtype=object), np.asarray(b, dtype=object)),
    domain=Domain((REALS, REALS), cases=((((2,), (3,)), {}), (((2, 2), (2, 3)), {}),
                                         (((1, 2), (3, 1)), {}))),
    rule_text=("each block of G times B, summed: einsum('aAbB,AB->ab', G, B)",
               "the blocks of G weighted by A, summed: einsum('aAbB,ab->AB', G, A)"))

cross = defop(
    "cross", lambda a, b: np.cross(a, b), _printer("np.cross"),
    vjp=(lambda g, ans, a, b: cross(b, g), lambda g, ans, a, b: cross(g, a)),
    sympy=lambda a, b: np.cross(np.asarray(a, dtype=object), np.asarray(b, dtype=object)),
    domain=Domain((REALS, REALS), cases=((((3,), (3,)), {}), (((2, 3), (2, 3)), {}),
                                         (((3,), (2, 3)), {}))),
    rule_text=("d (a x b)/da: b x G", "d (a x b)/db: G x a"))


# --- np.linalg: inverse, solve, determinants -------------------------------------------------

# Small cases: sympy's second derivatives of 3 x 3 inverses and decompositions take seconds.
_SQUARE = ((((2, 2),), {}), (((2, 2, 2),), {}))

inv = defop(
    "inv", np.linalg.inv, _printer("np.linalg.inv"),
    vjp=(lambda g, ans, a: -matmul(matmul(_mT(ans), g), _mT(ans)),),
    sympy=lambda a: _stacked(lambda m: m.inv(method="ADJ"), a),
    domain=Domain((REALS,), cases=_SQUARE),
    rule_text=("d inv(A)/dA: -inv(A).T @ G @ inv(A).T",))


def _solve_is_vector(a_shape, b_shape) -> bool:
    """NumPy 2 solves for a vector b only when b is 1-d; NumPy 1 when b has one axis less."""
    return len(b_shape) == 1 if _NUMPY2 else len(b_shape) == len(a_shape) - 1


def _solve_vjp_b(g, ans, a, b):
    a_t = _mT(a)
    if _solve_is_vector(_shape(a), _shape(b)) and _ndim(g) > 1:
        return reshape(solve(a_t, _col(g)), shape=_shape(g))
    return solve(a_t, g)


def _solve_vjp_a(g, ans, a, b):
    gb = _solve_vjp_b(g, ans, a, b)
    if not _solve_is_vector(_shape(a), _shape(b)):
        return -matmul(gb, _mT(ans))
    if _ndim(gb) == 1:
        return -outer(gb, ans)
    return -(_col(gb) * _row(ans))


def _sym_solve(a, b):
    a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    vector = _solve_is_vector(a.shape, b.shape)
    if vector:
        b = b[..., None]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = _assemble(batch, [_to_object(_as_matrix(a[i]).inv(method="ADJ") * _as_matrix(b[i]))
                            for i in np.ndindex(*batch)])
    return out[..., 0] if vector else out


solve = defop(
    "solve", np.linalg.solve, _printer("np.linalg.solve"),
    vjp=(_solve_vjp_a, _solve_vjp_b), sympy=_sym_solve,
    domain=Domain((REALS, REALS), cases=(
        (((2, 2), (2,)), {}), (((2, 2), (2, 3)), {}), (((2, 2, 2), (2,)), {}),
        (((2, 2), (2, 2, 1)), {}))),
    rule_text=("d solve(A, B)/dA: -solve(A.T, G) @ X.T, X the solution",
               "d solve(A, B)/dB: solve(A.T, G)"))

det = defop(
    "det", np.linalg.det, _printer("np.linalg.det"),
    vjp=(lambda g, ans, a: _unsqueeze2(g * ans) * _mT(inv(a)),),
    sympy=lambda a: _stacked(lambda m: m.det(), a),
    domain=Domain((REALS,), cases=_SQUARE + ((((3, 3),), {}),)),
    rule_text=(("d det(A)/dA: det(A) inv(A).T (A invertible; an exactly singular A stops "
               "with an error)"),))


def _logabsdet(a):
    return np.linalg.slogdet(a)[1]


def _sign_of_det(a):
    return np.linalg.slogdet(a)[0]


slogdet = defop(
    "slogdet", _logabsdet, _printer("np.linalg.slogdet", suffix="[1]"),
    vjp=(lambda g, ans, a: _unsqueeze2(g) * _mT(inv(a)),),
    sympy=lambda a: _stacked(lambda m: sp.log(sp.Abs(m.det())), a),
    domain=Domain((REALS,), cases=_SQUARE + ((((3, 3),), {}),)),
    rule_text=("d log|det(A)|/dA: inv(A).T (A invertible)",))


@functools.cache
def _locally_constant_sign():
    """sympy's sign with derivative 0 (not 2 DiracDelta, which NumPy cannot evaluate): true
    wherever det(A) != 0, the only places a rule is asked about."""

    class sign(sp.sign):  # prints as sign
        def _eval_derivative(self, x):
            return sp.S.Zero

    return sign


# The sign is constant where det(A) != 0: its derivative is zero. (A row with a rule rather than
# a nondiff one: the nondiff table test feeds Python floats and vectors, not matrices.)
slogdet_sign = defop(
    "slogdet_sign", _sign_of_det, _printer("np.linalg.slogdet", suffix="[0]"),
    vjp=(lambda g, ans, a: np.zeros(_shape(a), _dtype(a)),),
    sympy=lambda a: _stacked(lambda m: _locally_constant_sign()(m.det()), a),
    domain=Domain((REALS,), cases=_SQUARE),
    rule_text=("0: the sign of det(A) is constant where det(A) != 0",))


# --- np.linalg: decompositions ---------------------------------------------------------------


def _one_triangle(abar, uplo):
    """The gradient of a function of A's ``uplo`` triangle only (LAPACK reads nothing else),
    from its gradient Ā for symmetric perturbations: an off-diagonal entry of the triangle
    moves A[i, j] and A[j, i] of the symmetric matrix, so it gets Ā[i, j] + Ā[j, i]."""
    if uplo == "L":
        return tril(abar, k=0) + tril(_mT(abar), k=-1)
    return triu(abar, k=0) + triu(_mT(abar), k=1)


def _cholesky_vjp(g, ans, a, upper=False):
    # Murray (2016), arXiv:1602.07527, as in autograd and JAX: with P = Φ(L.T @ Ḡ) (Φ: the
    # lower triangle, diagonal halved), S = inv(L).T @ P @ inv(L) is the gradient for
    # symmetric perturbations. upper=True reads the upper triangle: U = cholesky(A.T).T.
    lower, g_lower = (_mT(ans), _mT(g)) if upper else (ans, g)
    p = matmul(_mT(lower), g_lower)
    p = (tril(p, k=0) + tril(p, k=-1)) * 0.5
    l_t = _mT(lower)
    s = solve(l_t, _mT(solve(l_t, _mT(p))))
    grad = _one_triangle(s, "L")
    return _mT(grad) if upper else grad


def _sym_cholesky(a, upper=False):
    def one(m):
        factor = _symmetric(m, "U" if upper else "L").cholesky(hermitian=False)
        return factor.T if upper else factor

    return _stacked(one, a)


cholesky = defop(
    "cholesky", lambda a, upper=False: np.linalg.cholesky(a, upper=True) if upper
    else np.linalg.cholesky(a),
    _printer("np.linalg.cholesky", ("upper",), {"upper": False}),
    vjp=(_cholesky_vjp,), sympy=_sym_cholesky,
    # The table samples every entry from one interval, which cannot make a 2 x 2 matrix
    # positive definite: 1 x 1 here, larger ones in tests/test_linalg_numpy.py.
    domain=Domain(((0.5, 2.0),), cases=((((1, 1),), {"upper": False}),
                                        (((2, 1, 1),), {"upper": False}),
                                        (((1, 1),), {"upper": True}))),
    rule_text=(("Murray's rule: S = inv(L).T @ Φ(L.T @ Ḡ) @ inv(L), Φ the lower triangle with "
               "its diagonal halved; the read triangle gets S + S.T off the diagonal, S on it, "
               "the other triangle 0"),))


def _eigvalsh_vjp(g, ans, a, UPLO="L"):
    v = eigh_vectors(a, UPLO=UPLO)
    return _one_triangle(matmul(v * _row(g), _mT(v)), UPLO)  # V diag(G) V.T


def _inverse_gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    gaps = _row(w) - _col(w)
    return add_eye(1 / add_eye(gaps, scale=1.0), scale=-1.0)


def _eigh_vectors_vjp(g, ans, a, UPLO="L"):
    v = ans
    f = _inverse_gaps(eigvalsh(a, UPLO=UPLO))
    abar = matmul(matmul(v, f * matmul(_mT(v), g)), _mT(v))  # V (F ∘ V.T Ḡ) V.T
    return _one_triangle(abar, UPLO)


_EIGH_CASES = ((((2, 2),), {"UPLO": "L"}), (((2, 2),), {"UPLO": "U"}),
               (((2, 2, 2),), {"UPLO": "L"}))

eigvalsh = defop(
    "eigvalsh", lambda a, UPLO="L": np.linalg.eigvalsh(a, UPLO=UPLO),
    _printer("np.linalg.eigvalsh", ("UPLO",), {"UPLO": "L"}),
    vjp=(_eigvalsh_vjp,),
    sympy=lambda a, UPLO="L": _stacked(lambda m: _sym_eigh(_symmetric(m, UPLO), UPLO)[0], a),
    domain=Domain((REALS,), cases=_EIGH_CASES + ((((3, 3),), {"UPLO": "L"}),)),
    rule_text=("V diag(G) V.T, on the read triangle (off-diagonal entries count twice)",))

eigh_vectors = defop(
    "eigh_vectors", lambda a, UPLO="L": np.linalg.eigh(a, UPLO=UPLO)[1],
    _printer("np.linalg.eigh", ("UPLO",), {"UPLO": "L"}, suffix="[1]"),
    vjp=(_eigh_vectors_vjp,),
    sympy=lambda a, UPLO="L": _stacked(lambda m: _sym_eigh(_symmetric(m, UPLO), UPLO)[1], a),
    domain=Domain((REALS,), cases=_EIGH_CASES),
    rule_text=(("V (F ∘ V.T G) V.T with F[i, j] = 1 / (w[j] - w[i]) off the diagonal (distinct "
               "eigenvalues), on the read triangle"),))


def _pinv_vjp(g, ans, a):
    # Golub & Pereyra (1973) for a full-rank A (m x n): besides -P.T G P.T, a tall A adds
    # (I - A P) G.T P P.T and a wide one P.T P G.T (I - P A) (the other projector is 0).
    p = ans
    m, n = _shape(a)[-2:]
    p_t, g_t = _mT(p), _mT(g)
    out = -matmul(matmul(p_t, g), p_t)
    if m > n:
        mm = matmul(g_t, matmul(p, p_t))
        out = out + (mm - matmul(a, matmul(p, mm)))
    elif m < n:
        nn = matmul(matmul(p_t, p), g_t)
        out = out + (nn - matmul(matmul(nn, p), a))
    return out


def _sym_pinv_one(m):
    rows, cols = m.shape
    if rows == cols:
        return m.inv(method="ADJ")
    if rows > cols:
        return (m.T * m).inv(method="ADJ") * m.T
    return m.T * (m * m.T).inv(method="ADJ")


# tall and wide: rank-1 ones keep sympy quick (2 x 3 ones are in tests/test_linalg_numpy.py)
_RECT = ((((2, 2),), {}), (((3, 1),), {}), (((1, 3),), {}), (((2, 2, 2),), {}))

pinv = defop(
    "pinv", np.linalg.pinv, _printer("np.linalg.pinv"), vjp=(_pinv_vjp,),
    sympy=lambda a: _stacked(_sym_pinv_one, a), domain=Domain((REALS,), cases=_RECT),
    rule_text=(("-P.T G P.T + (I - A P) G.T P P.T + P.T P G.T (I - P A), P = pinv(A) (full "
               "rank)"),))


def _svdvals_vjp(g, ans, a):
    return matmul(svd_u(a) * _row(g), svd_vh(a))  # U diag(G) Vh


def _svd_u_vjp(g, ans, a):
    # Townsend (2016), "Differentiating the singular value decomposition": the U part.
    u, s, vh = ans, svdvals(a), svd_vh(a)
    m, k = _shape(u)[-2:]
    x = matmul(_mT(u), g)
    s2 = s * s
    out = matmul(matmul(u, _inverse_gaps(s2) * (x - _mT(x)) * _row(s)), vh)
    if m > k:  # (I - U U.T) Ḡ S^-1 Vh
        out = out + matmul((g - matmul(u, x)) / _row(s), vh)
    return out


def _svd_vh_vjp(g, ans, a):
    u, s, vh = svd_u(a), svdvals(a), ans
    k, n = _shape(vh)[-2:]
    x = matmul(vh, _mT(g))  # V.T V̄
    s2 = s * s
    out = matmul(matmul(u, _col(s) * (_inverse_gaps(s2) * (x - _mT(x)))), vh)
    if n > k:  # U S^-1 Ḡ (I - V V.T)
        out = out + matmul(u / _row(s), g - matmul(_mT(x), vh))
    return out


svdvals = defop(
    "svdvals", lambda a: np.linalg.svd(a, compute_uv=False),
    lambda node, args: Expr(f"np.linalg.svd({args[0].text}, compute_uv=False)"),
    vjp=(_svdvals_vjp,), sympy=lambda a: _stacked(lambda m: _sym_svd(m, "s"), a),
    xp=lambda node, args, scope: Expr(f"xp.linalg.svdvals({args[0].text})"),
    domain=Domain((REALS,), cases=_RECT + ((((3, 2),), {}),)),
    rule_text=("U diag(G) Vh",))

svd_u = defop(
    "svd_u", lambda a: np.linalg.svd(a, full_matrices=False)[0],
    lambda node, args: Expr(f"np.linalg.svd({args[0].text}, full_matrices=False)[0]"),
    vjp=(_svd_u_vjp,), sympy=lambda a: _stacked(lambda m: _sym_svd(m, "u"), a),
    domain=Domain((REALS,), cases=_RECT[:3]),
    rule_text=(("U (F ∘ (U.T G - G.T U)) S Vh + (I - U U.T) G S^-1 Vh, F[i, j] = "
               "1 / (s[j]^2 - s[i]^2) (distinct nonzero singular values)"),))

svd_vh = defop(
    "svd_vh", lambda a: np.linalg.svd(a, full_matrices=False)[2],
    lambda node, args: Expr(f"np.linalg.svd({args[0].text}, full_matrices=False)[2]"),
    vjp=(_svd_vh_vjp,), sympy=lambda a: _stacked(lambda m: _sym_svd(m, "vh"), a),
    domain=Domain((REALS,), cases=_RECT[:3]),
    rule_text=("U S (F ∘ (V.T V̄ - V̄.T V)) Vh + U S^-1 V̄.T (I - V V.T), V̄ = G.T",))


# --- how NumPy reaches these rows ------------------------------------------------------------


def _axis(axis, n: int) -> int:
    axis = operator.index(axis)
    if not -n <= axis < n:
        raise np.exceptions.AxisError(axis, n)
    return axis % n


def _result(kind, *parts):
    """NumPy's named tuple for a decomposition (EighResult, SVDResult, ...) of traced parts."""
    return tuple(parts) if kind is tuple else kind(*parts)


_EIGH_RESULT = type(np.linalg.eigh(np.eye(1)))
_SLOGDET_RESULT = type(np.linalg.slogdet(np.eye(1)))
_SVD_RESULT = type(np.linalg.svd(np.eye(1)))


def _flat(x):
    return x if _ndim(x) == 1 else reshape(x, shape=(int(np.prod(_shape(x))),))


def _dot(a, b, out=None):
    if out is not None:
        refuse("np.dot(..., out=...) writes in place", "use the returned value")
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return a * b
    if (na <= 2 and nb <= 2) or na == 1 or nb == 1:
        return matmul(a, b)
    return _td(a, b, (na - 1,), (nb - 2,))  # over a's last axis and b's second-to-last


def _vdot(a, b):
    return matmul(_flat(a), _flat(b))


def _inner(a, b):
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return a * b
    if na == 1 and nb == 1:
        return matmul(a, b)
    return _td(a, b, (na - 1,), (nb - 1,))


def _outer(a, b, out=None):
    if out is not None:
        refuse("np.outer(..., out=...) writes in place", "use the returned value")
    return outer(_flat(a), _flat(b))


def _linalg_outer(x1, x2):
    if _ndim(x1) != 1 or _ndim(x2) != 1:
        raise ValueError("Input arrays must be one-dimensional")
    return outer(x1, x2)


def _tensordot_axes(axes, na, nb):
    try:
        n = operator.index(axes)
    except TypeError:
        axes_a, axes_b = axes
        axes_a = tuple(np.ravel(axes_a).tolist())  # an int, a list, a tuple or an array
        axes_b = tuple(np.ravel(axes_b).tolist())
        if len(axes_a) != len(axes_b):
            raise ValueError("shape-mismatch for sum") from None
        return tuple(_axis(i, na) for i in axes_a), tuple(_axis(i, nb) for i in axes_b)
    if n < 0 or n > min(na, nb):
        raise ValueError("shape-mismatch for sum")
    return tuple(range(na - n, na)), tuple(range(n))


def _tensordot(a, b, axes=2):
    axes_a, axes_b = _tensordot_axes(axes, _ndim(a), _ndim(b))
    return _td(a, b, axes_a, axes_b)


def _kron(a, b):
    na, nb = _ndim(a), _ndim(b)
    if na == 0 and nb == 0:
        return a * b
    nd = max(na, nb)
    if na < nd:
        a = reshape(a, shape=(1,) * (nd - na) + _shape(a))
    if nb < nd:
        b = reshape(b, shape=(1,) * (nd - nb) + _shape(b))
    return kron(a, b)


def _move_last(x, axis):
    n = _ndim(x)
    axis = _axis(axis, n)
    return _transposed(x, [i for i in range(n) if i != axis] + [axis])


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _move_last(a, axisa), _move_last(b, axisb)
    da, db = _shape(a)[-1], _shape(b)[-1]
    if da not in (2, 3) or db not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    if da == db == 2:  # the z component of the 3-vectors with z = 0 (deprecated by NumPy)
        return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    if da != db:
        refuse(f"np.cross of {da}-vectors with {db}-vectors has no gradient rule in gradgen",
               "give both arrays 3-vectors")
    out = cross(a, b)
    n = _ndim(out)
    c = _axis(axisc, n)
    order = list(range(n - 1))
    order.insert(c, n - 1)
    return _transposed(out, order)


def _linalg_cross(x1, x2, /, *, axis=-1):
    a, b = _move_last(x1, axis), _move_last(x2, axis)
    if _shape(a)[-1] != 3 or _shape(b)[-1] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they are {_shape(a)[-1]} and {_shape(b)[-1]} dimensional instead.")
    return _cross(x1, x2, axis=axis)


# np.einsum: subscripts normalized to explicit form, '...' spelled out in unused letters.
_SUBLIST_LETTERS = string.ascii_uppercase + string.ascii_lowercase  # NumPy: 0 -> 'A'


def _sublist_text(sub) -> str:
    return "".join("..." if s is Ellipsis else _SUBLIST_LETTERS[operator.index(s)]
                   for s in sub)


def _einsum_subscripts(subscripts: str, shapes) -> str:
    """'ij,jk' -> 'ij,jk->ik', '...ij,...jk->...ik' -> 'Aij,Ajk->Aik': the explicit form,
    with NumPy's implicit output (broadcast axes, then labels used once, in ASCII order)."""
    text = subscripts.replace(" ", "")
    explicit = "->" in text
    lhs, out = text.split("->", 1) if explicit else (text, "")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"the einsum subscripts name {len(terms)} operands, but "
                         f"{len(shapes)} were given")
    for term in [*terms, out]:
        bad = set(term.replace("...", "", 1)) - set(string.ascii_letters)
        if bad:
            raise ValueError(f"invalid subscript {min(bad)!r} in einstein sum subscripts "
                             "string, subscripts must be letters")
    used = set(text) & set(string.ascii_letters)
    spare = [c for c in _SUBLIST_LETTERS if c not in used]
    n_ell = []
    for k, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        letters = len(term) - (3 if "..." in term else 0)
        extra = len(shape) - letters
        if extra < 0 or (extra > 0 and "..." not in term):
            raise ValueError("einstein sum subscripts string contains too "
                             f"{'many' if extra < 0 else 'few'} subscripts for operand {k}")
        n_ell.append(extra if "..." in term else 0)
    width = max(n_ell, default=0)
    ell = "".join(spare[:width])
    terms = [t.replace("...", ell[width - e:]) for t, e in zip(terms, n_ell, strict=True)]
    if explicit:
        out = out.replace("...", ell)
    else:
        counts = {c: "".join(terms).count(c) for c in "".join(terms)}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return ",".join(terms) + "->" + out


def _einsum(*operands, out=None, dtype=None, order="K", casting="safe", optimize=False):
    if out is not None or dtype is not None or order != "K" or casting != "safe":
        given = [name for name, v, d in (("out", out, None), ("dtype", dtype, None),
                                         ("order", order, "K"), ("casting", casting, "safe"))
                 if v != d]
        refuse(f"np.einsum(..., {'=, '.join(given)}=) has no gradient rule in gradgen",
               "call np.einsum(subscripts, *operands)")
    if isinstance(optimize, list | tuple):
        refuse("np.einsum with an explicit contraction path has no gradient rule in gradgen",
               "pass optimize=True")
    if operands and isinstance(operands[0], str):
        subscripts, arrays = operands[0], list(operands[1:])
    else:  # einsum(a, [0, 1], b, [1, 2], [0, 2])
        items = list(operands)
        tail = items.pop() if len(items) % 2 == 1 else None
        arrays = items[::2]
        subscripts = ",".join(_sublist_text(s) for s in items[1::2])
        if tail is not None:
            subscripts += "->" + _sublist_text(tail)
    spec = _einsum_subscripts(subscripts, [_shape(x) for x in arrays])
    return einsum(*arrays, subscripts=spec, optimize=optimize or False)


def _vecdot(x1, x2, axis=-1):
    nd = max(_ndim(x1), _ndim(x2))
    axis = _axis(axis, nd) - nd  # counted from the end of the broadcast shape
    a, b = _move_last(x1, axis), _move_last(x2, axis)
    return einsum(a, b, subscripts=_einsum_subscripts("...i,...i->...", [_shape(a), _shape(b)]))


def _matvec(x1, x2):
    return einsum(x1, x2, subscripts=_einsum_subscripts("...ij,...j->...i",
                                                        [_shape(x1), _shape(x2)]))


def _vecmat(x1, x2):
    return einsum(x1, x2, subscripts=_einsum_subscripts("...i,...ij->...j",
                                                        [_shape(x1), _shape(x2)]))


def _np_trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if out is not None:
        refuse("np.trace(..., out=...) writes in place", "use the returned value")
    if dtype is not None:
        if np.dtype(dtype).kind != "f":
            refuse(f"np.trace(..., dtype={np.dtype(dtype).name}) has no gradient rule in "
                   "gradgen", "trace in a float dtype")
        if np.result_type(_value(a)) != np.dtype(dtype) or _ndim(a) == 0:
            a = cast(a, dtype=np.dtype(dtype).name)
    n = _ndim(a)
    return trace(a, offset=operator.index(offset), axis1=_axis(axis1, n), axis2=_axis(axis2, n))


def _linalg_trace(x, /, *, offset=0, dtype=None):
    n = _ndim(x)
    return _np_trace(x, offset, n - 2, n - 1, dtype)


def _np_diagonal(a, offset=0, axis1=0, axis2=1):
    n = _ndim(a)
    if n < 2:
        raise ValueError("diag requires an array of at least two dimensions")
    axis1, axis2 = _axis(axis1, n), _axis(axis2, n)
    if axis1 == axis2:
        raise ValueError("axis1 and axis2 cannot be the same")
    return diagonal(a, offset=operator.index(offset), axis1=axis1, axis2=axis2)


def _linalg_diagonal(x, /, *, offset=0):
    n = _ndim(x)
    return _np_diagonal(x, offset, n - 2, n - 1)


def _np_diag(v, k=0):
    n = _ndim(v)
    if n == 1:
        return diag(v, k=operator.index(k))
    if n == 2:
        return diagonal(v, offset=operator.index(k), axis1=0, axis2=1)
    raise ValueError("Input must be 1- or 2-d.")


def _np_diagflat(v, k=0):
    """np.diagflat: the flattened input on the k-th diagonal of a new square array."""
    size = int(np.size(_value(v)))
    flat = v if _ndim(v) == 1 else reshape(v, shape=(size,))
    return diag(flat, k=operator.index(k))


def _np_fill_diagonal(a, val, wrap=False):
    """np.fill_diagonal: writes ``val`` (repeated as needed) on the main diagonal of ``a``,
    in place, at the flat positions NumPy's own code computes (``wrap`` for tall matrices);
    a traced ``a`` takes the write as a new version of the array (see inplace.py)."""
    shape = _shape(a)
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    if len(shape) == 2:
        step = shape[1] + 1
        end = None if wrap else shape[1] * shape[1]
    else:
        step = 1 + int(np.cumprod(shape[:-1]).sum())
        end = None
    positions = np.arange(0, int(np.prod(shape)), step)[:None if end is None else
                                                        -(-end // step)]
    where = np.unravel_index(positions, shape)
    count = len(positions)
    if _ndim(val) == 0:
        a[where] = val
        return
    size = int(np.size(_value(val)))
    flat = val if _ndim(val) == 1 else reshape(val, shape=(size,))
    a[where] = flat if size == count else flat[np.arange(count) % size]  # NumPy repeats it


def _np_tril(m, k=0):
    return tril(m, k=operator.index(k))


def _np_triu(m, k=0):
    return triu(m, k=operator.index(k))


def _square(a):
    s = _shape(a)
    if len(s) < 2:
        raise np.linalg.LinAlgError(f"{len(s)}-dimensional array given. Array must be at "
                                    "least two-dimensional")
    if s[-1] != s[-2]:
        raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")


def _inv(a):
    return inv(a)


def _solve(a, b):
    return solve(a, b)


def _det(a):
    return det(a)


def _slogdet(a):
    return _result(_SLOGDET_RESULT, slogdet_sign(a), slogdet(a))


def _cholesky(a, /, *, upper=False):
    return cholesky(a, upper=bool(upper))


def _uplo(UPLO) -> str:
    uplo = str(UPLO).upper()
    if uplo not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return uplo


def _eigh(a, UPLO="L"):
    uplo = _uplo(UPLO)
    return _result(_EIGH_RESULT, eigvalsh(a, UPLO=uplo), eigh_vectors(a, UPLO=uplo))


def _eigvalsh(a, UPLO="L"):
    return eigvalsh(a, UPLO=_uplo(UPLO))


def _pinv(a, rcond=None, hermitian=False, *, rtol=np._NoValue):
    default_rcond = rcond is None or (not _NUMPY2 and rcond == 1e-15)
    if not default_rcond or rtol not in (np._NoValue, None) or hermitian:
        refuse("np.linalg.pinv with rcond=, rtol= or hermitian= has no gradient rule in "
               "gradgen", "call np.linalg.pinv(a) on a full-rank matrix")
    return pinv(a)


def _lstsq(a, b, rcond=None):
    """np.linalg.lstsq of a full-rank matrix: the solution is pinv(a) @ b (the same numbers
    as NumPy's SVD solver, up to rounding), the residuals are the squared 2-norms of b - a @ x
    per column (none when a is not tall), the rank is min(m, n) and s the singular values.
    A rank-deficient matrix has no unique solution to differentiate: refused by name."""
    a_value = np.asarray(getattr(a, "value", a))
    if a_value.ndim != 2:
        raise np.linalg.LinAlgError(f"{a_value.ndim}-dimensional array given. Array must be "
                                    "two-dimensional")
    m, n = a_value.shape
    singular = np.linalg.svd(a_value, compute_uv=False)
    cutoff = (np.finfo(a_value.dtype).eps * max(m, n) if rcond is None else rcond) * (
        singular.max() if singular.size else 0.0)
    if int(np.sum(singular > cutoff)) < min(m, n):
        refuse("np.linalg.lstsq of a rank-deficient matrix has no gradient rule in gradgen "
               "(its least-squares solution is not unique)",
               "drop the dependent columns, or add a ridge term and use np.linalg.solve")
    x = matmul(pinv(a), b)
    if m > n:
        residual = b - matmul(a, x)
        squares = sum_(residual * residual, axis=(0,), keepdims=False)
        residuals = reshape(squares, shape=(1,)) if _ndim(b) == 1 else squares
    else:
        residuals = np.zeros((0,), dtype=a_value.dtype)
    return x, residuals, min(m, n), svdvals(a)


def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        refuse("np.linalg.svd(..., hermitian=True) has no gradient rule in gradgen",
               "call np.linalg.svd(a, full_matrices=False)")
    if not compute_uv:
        return svdvals(a)
    s = _shape(a)
    if full_matrices and len(s) >= 2 and s[-1] != s[-2]:
        refuse("np.linalg.svd with full_matrices=True of a non-square matrix has no gradient "
               "rule in gradgen (the extra singular vectors are not unique)",
               "pass full_matrices=False")
    return _result(_SVD_RESULT, svd_u(a), svdvals(a), svd_vh(a))


def _svdvals(x, /):
    return svdvals(x)


def _matrix_power(a, n):
    """As NumPy computes it: inv for a negative n, then products by repeated squaring."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError("exponent must be an integer") from None
    _square(a)
    if n == 0:
        shape = _shape(a)
        return np.broadcast_to(np.eye(shape[-1], dtype=_dtype(a)), shape).copy()
    if n < 0:
        a, n = inv(a), -n
    if n == 1:
        return a
    if n == 2:
        return matmul(a, a)
    if n == 3:
        return matmul(matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result


def _chain_order(shapes):
    """NumPy's multi_dot order: the matrix-chain dynamic programme (ties: the first split)."""
    n = len(shapes)
    p = [s[0] for s in shapes] + [shapes[-1][1]]
    cost = np.zeros((n, n))
    split = np.zeros((n, n), dtype=int)
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i, j] = np.inf
            for k in range(i, j):
                q = cost[i, k] + cost[k + 1, j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i, j]:
                    cost[i, j] = q
                    split[i, j] = k
    return split


def _multi_dot(arrays, *, out=None):
    if out is not None:
        refuse("np.linalg.multi_dot(..., out=...) writes in place", "use the returned value")
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    if len(arrays) == 2:
        return _dot(arrays[0], arrays[1])
    first, last = _ndim(arrays[0]), _ndim(arrays[-1])
    if first == 1:
        arrays[0] = reshape(arrays[0], shape=(1,) + _shape(arrays[0]))
    if last == 1:
        arrays[-1] = reshape(arrays[-1], shape=_shape(arrays[-1]) + (1,))
    if len(arrays) == 3:
        a, b, c = arrays
        (a0, a1b0), (b1c0, c1) = _shape(a), _shape(c)
        if a0 * b1c0 * (a1b0 + c1) < a1b0 * c1 * (a0 + b1c0):
            result = matmul(matmul(a, b), c)
        else:
            result = matmul(a, matmul(b, c))
    else:
        split = _chain_order([_shape(x) for x in arrays])
        # the products in the order NumPy's recursion makes them, without recursing
        stack, done = [(0, len(arrays) - 1, False)], {}
        while stack:
            i, j, ready = stack.pop()
            if i == j:
                done[i, j] = arrays[i]
            elif ready:
                k = int(split[i, j])
                done[i, j] = matmul(done[i, k], done[k + 1, j])
            else:
                k = int(split[i, j])
                stack += [(i, j, True), (k + 1, j, False), (i, k, False)]
        result = done[0, len(arrays) - 1]
    if first == 1 and last == 1:
        return result[0, 0]
    if first == 1 or last == 1:
        return reshape(result, shape=(int(np.prod(_shape(result))),))
    return result


route(np.dot, _dot, "matmul", "tensordot")
route(np.vdot, _vdot, "matmul", "reshape")
route(np.inner, _inner, "matmul", "tensordot")
route(np.outer, _outer, "outer", "reshape")
route(np.tensordot, _tensordot, "tensordot")
route(np.einsum, _einsum, "einsum")
route(np.kron, _kron, "kron", "reshape")
route(np.cross, _cross, "cross")
route(np.trace, _np_trace, "trace")
route(np.diagonal, _np_diagonal, "diagonal")
route(np.diag, _np_diag, "diag", "diagonal")
route(np.diagflat, _np_diagflat, "diag", "reshape")
route(np.fill_diagonal, _np_fill_diagonal, "index_update", "getitem")
route(np.tril, _np_tril, "tril")
route(np.triu, _np_triu, "triu")
route(np.linalg.inv, _inv, "inv")
route(np.linalg.solve, _solve, "solve")
route(np.linalg.det, _det, "det")
route(np.linalg.slogdet, _slogdet, "slogdet", "slogdet_sign")
route(np.linalg.cholesky, _cholesky, "cholesky")
route(np.linalg.eigh, _eigh, "eigvalsh", "eigh_vectors")
route(np.linalg.eigvalsh, _eigvalsh, "eigvalsh")
route(np.linalg.pinv, _pinv, "pinv")
route(np.linalg.lstsq, _lstsq, "pinv", "matmul", "svdvals")
route(np.linalg.svd, _svd, "svd_u", "svdvals", "svd_vh")
route(np.linalg.matrix_power, _matrix_power, "matmul", "inv")
route(np.linalg.multi_dot, _multi_dot, "matmul")
if _NUMPY2:  # the array API spellings NumPy 2 added
    route(np.linalg.matmul, matmul, "matmul")
    route(np.linalg.outer, _linalg_outer, "outer")
    route(np.linalg.tensordot, _tensordot, "tensordot")
    route(np.linalg.vecdot, _vecdot, "einsum")
    route(np.linalg.trace, _linalg_trace, "trace")
    route(np.linalg.diagonal, _linalg_diagonal, "diagonal")
    route(np.linalg.cross, _linalg_cross, "cross")
    route(np.linalg.svdvals, _svdvals, "svdvals")
    route(np.vecdot, _vecdot, "einsum")
for _name, _handler in (("matvec", _matvec), ("vecmat", _vecmat)):
    if hasattr(np, _name):  # NumPy >= 2.2
        route(getattr(np, _name), _handler, "einsum")
