"""A new user's mistakes and the edges they push at: each one either works as written or
raises a GradgenError that names the problem and the user's line (never an internal
traceback, never a silently wrong gradient). Cases the other error tests cover are not here
(see test_errors.py, test_api.py, test_cli_commands.py)."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import gradgen

grad = gradgen.grad


def _where(fn, text: str) -> str:
    """``test_user_mistakes.py:<line>`` of the first line of ``fn`` containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return f"test_user_mistakes.py:{first + offset}"
    raise AssertionError(f"{text!r} not in {fn.__name__}")


# --- what is handed to grad ----------------------------------------------------------------


def test_a_value_instead_of_a_function_is_refused_where_it_is_passed():
    def f(x):
        return x * x

    with pytest.raises(gradgen.GradgenError, match="expected a function to differentiate") as e:
        grad(f(3.0))  # the usual slip: the call's value, not the function
    here = _where(test_a_value_instead_of_a_function_is_refused_where_it_is_passed, "(f(3.0))")
    assert str(e.value).startswith(here + ": ")
    assert "gradgen.grad(f), not gradgen.grad(f(x))" in str(e.value)
    with pytest.raises(gradgen.GradgenError, match="got ndarray"):
        gradgen.vjp(np.ones(2), 1.0)
    with pytest.raises(gradgen.GradgenError, match="float object 2.0 is not a function"):
        gradgen.emit(2.0, 1.0)


def two_parameters(x, y):
    return x * y


def test_too_few_or_too_many_arguments_name_the_signature_and_the_def_line():
    for args in ((1.0,), (1.0, 2.0, 3.0)):
        with pytest.raises(gradgen.GradgenError) as info:
            grad(two_parameters)(*args)
        message = str(info.value)
        assert message.startswith(_where(two_parameters, "def two_parameters") + ": ")
        assert "two_parameters(x, y) cannot be called with" in message
    with pytest.raises(gradgen.GradgenError, match=r"two_parameters\(x, y\)"):
        gradgen.emit(two_parameters, 1.0)


def test_a_type_error_inside_the_function_is_still_the_users():
    def f(x):
        return len(5) * x  # the user's own bug: Python's TypeError, from the user's line

    with pytest.raises(TypeError, match="has no len"):
        grad(f)(1.0)


def masked_sum(x):
    return np.sum(x * x)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix's own
def test_masked_arrays_and_matrices_are_refused_not_silently_unmasked():
    # the masked element would get a gradient of 2: np.sum of a masked array skips it
    with pytest.raises(gradgen.GradgenError) as info:
        grad(masked_sum)(np.ma.array([1.0, 2.0], mask=[0, 1]))
    message = str(info.value)
    assert message.startswith(_where(masked_sum, "def masked_sum"))
    assert "'x' is a masked array" in message and "x.filled(0.0)" in message
    with pytest.raises(gradgen.GradgenError, match=r"'x' is a np.matrix.*np.asarray\(x\)"):
        grad(masked_sum)(np.matrix([[1.0, 2.0]]))
    with pytest.raises(gradgen.GradgenError, match="'w' is a masked array"):  # data, too
        grad(lambda x, w: np.sum(x * w))(np.ones(2), np.ma.array([1.0, 2.0], mask=[0, 1]))


# --- the function's body ---------------------------------------------------------------------


def test_math_imported_inside_the_function_is_traced():
    def f(x):
        import math as m

        return m.sin(x) * x

    def g(x):
        from math import exp

        return exp(2.0 * x)

    def h(x):
        import numpy

        return numpy.sum(numpy.tanh(x))

    assert grad(f)(1.0) == pytest.approx(np.cos(1.0) * 1.0 + np.sin(1.0))
    assert grad(g)(0.5) == pytest.approx(2.0 * np.exp(1.0))
    np.testing.assert_allclose(grad(h)(np.ones(2)), 1.0 - np.tanh(1.0) ** 2)


def test_formatting_a_traced_value_shows_its_value(capsys):
    def f(x):
        print(f"loss={np.sum(x * x):.3f}")
        return np.sum(x * x)

    np.testing.assert_array_equal(grad(f)(np.array([1.0, 2.0])), [2.0, 4.0])
    assert capsys.readouterr().out == "loss=5.000\n"


def test_copies_of_traced_values_are_traced_and_independent():
    import copy

    def f(x):
        y = copy.copy(x)
        y[0] = 5.0  # a write into the copy: x stays as it was
        params = copy.deepcopy({"a": x})
        return np.sum(y * x) + np.sum(params["a"])

    np.testing.assert_array_equal(grad(f)(np.ones(3)), [6.0, 3.0, 3.0])


def pickled(x):
    import pickle

    return np.sum(pickle.loads(pickle.dumps(x)) * x)


def test_pickling_a_traced_value_is_refused_at_its_line():
    with pytest.raises(gradgen.UnsupportedOperation, match="pickling a traced value") as info:
        grad(pickled)(np.ones(2))
    assert str(info.value).startswith(_where(pickled, "pickle.dumps(x)") + ": ")


# --- arguments gradgen cannot take: the message names the parameter and the def line -------


def scaled(x, p):
    return x * p[0]


def test_a_namedtuple_is_refused_not_rebuilt_as_a_list():
    import collections

    pair = collections.namedtuple("Pair", "w b")
    for call in (lambda: grad(scaled)(1.0, pair(2.0, 3.0)),
                 lambda: grad(scaled, argnums=1)(1.0, pair(2.0, 3.0)),
                 lambda: gradgen.emit(scaled, 1.0, pair(2.0, 3.0))):
        with pytest.raises(gradgen.GradgenError) as info:
            call()
        assert str(info.value).startswith(_where(scaled, "def scaled") + ": argument 'p' is a "
                                          "Pair (a namedtuple)")
        assert "._asdict()" in str(info.value)
    with pytest.raises(gradgen.GradgenError, match="returned a Pair"):
        gradgen.vjp(lambda x: pair(x, 2 * x), 1.0)


def test_an_unhashable_static_argument_names_its_parameter():
    with pytest.raises(gradgen.GradgenError) as info:
        grad(scaled)(1.0, {2.0, 3.0})
    assert str(info.value).startswith(_where(scaled, "def scaled") + ": argument 'p' is a set")


def test_intermediates_that_are_not_names_are_refused():
    here = _where(test_intermediates_that_are_not_names_are_refused, "=3)" + "(1.0)")
    with pytest.raises(gradgen.GradgenError, match="intermediates must be a name") as info:
        grad(masked_sum, intermediates=3)(1.0)
    assert str(info.value).startswith(here + ": ")

    def f(x):
        yz = x * 2.0
        return yz * yz

    # one name given as a string is one name (not 'y' and 'z'), through emit as through grad
    assert grad(f, intermediates="yz")(1.0) == (8.0, {"yz": 4.0})
    assert "def f_grad(x)" in gradgen.emit(f, 1.0, intermediates="yz")


# --- gradgen.Function -----------------------------------------------------------------------


class NoBackward(gradgen.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0


class ReturnsText(gradgen.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return "2 * g"


def test_a_function_without_backward_is_refused_at_its_apply():
    def f(x):
        return NoBackward.apply(x) * x

    with pytest.raises(gradgen.GradgenError, match="NoBackward defines no backward") as info:
        grad(f)(1.0)
    assert str(info.value).startswith(_where(f, "NoBackward.apply(x)") + ": ")
    assert NoBackward.apply(1.0) == 2.0  # untraced, forward alone is fine


def test_a_backward_returning_something_else_names_its_class_and_line():
    with pytest.raises(gradgen.GradgenError) as info:
        grad(lambda x: ReturnsText.apply(x))(1.0)
    message = str(info.value)
    assert message.startswith(_where(ReturnsText, "def backward") + ": ")
    assert "ReturnsText.backward returned a str as the gradient for input 0" in message


# --- gradgen.check ----------------------------------------------------------------------------


def test_check_falls_back_to_finite_differences_where_sympy_recurses_too_deep():
    def f(x):
        for _ in range(300):  # sin(sin(...)) 300 deep: past sympy's recursion
            x = np.sin(x)
        return x

    report = gradgen.check(f, 0.5)
    assert report.results[0].method == "finite differences"
    assert report.results[0].max_rel_error < 1e-5


# --- Python's own spellings ------------------------------------------------------------------


def fsum_of(x):
    return math.fsum([x, 2.0 * x])


def test_math_of_a_list_of_traced_values_is_named_not_blamed_on_float():
    with pytest.raises(gradgen.UnsupportedOperation) as info:
        grad(fsum_of)(1.0)
    message = str(info.value)
    assert message.startswith(_where(fsum_of, "math.fsum") + ": math.fsum has no gradient rule")
    assert "sum(values)" in message and "float()" not in message
    with pytest.raises(gradgen.UnsupportedOperation, match="math.dist has no gradient rule"):
        grad(lambda x: math.dist([x, 1.0], [0.0, 0.0]))(3.0)
    assert grad(lambda x: math.prod([x, x, 2.0]))(3.0) == 12.0  # multiplies as written


def test_divmod_of_a_traced_value():
    # d/dx [3 (x mod 1) + (7 mod x)] = 3 - floor(7 / x) at x = 2.5
    assert grad(lambda x: 3.0 * divmod(x, 1.0)[1] + divmod(7.0, x)[1])(2.5) == 1.0


# --- the CLI ---------------------------------------------------------------------------------


CHATTY_MODULE = '''\
print("loading the model")


def loss(x):
    print("computing the loss")
    return x * x


class Model:
    @staticmethod
    def loss(x):
        return 3.0 * x
'''


def test_cli_keeps_the_users_prints_out_of_the_emitted_module(tmp_path, capsys):
    from gradgen.cli import main

    path = tmp_path / "chatty.py"
    path.write_text(CHATTY_MODULE)
    for command in ("emit", "show", "check", "graph", "explain"):
        extra = ["--text"] if command == "graph" else []
        assert main([command, f"{path}:loss", "--args", "(2.0,)", *extra]) == 0
        out, err = capsys.readouterr()
        printed = {"loading the model", "computing the loss"}  # (explain's page quotes them)
        assert not printed & set(out.splitlines()), command
        assert "computing the loss" in err
    assert main(["emit", f"{path}:loss", "--args", "(2.0,)"]) == 0
    namespace: dict = {}
    exec(capsys.readouterr().out, namespace)  # noqa: S102 - stdout is the module, only it
    assert namespace["loss_grad"](3.0) == 6.0


def test_cli_finds_a_method_by_its_dotted_name_and_says_a_directory_is_one(tmp_path, capsys):
    from gradgen.cli import main

    path = tmp_path / "chatty.py"
    path.write_text(CHATTY_MODULE)
    assert main(["emit", f"{path}:Model.loss", "--args", "(2.0,)"]) == 0
    namespace: dict = {}
    exec(capsys.readouterr().out, namespace)  # noqa: S102 - the emitted module
    assert namespace["loss_grad"](1.0) == 3.0
    assert main(["emit", f"{path}:Model.nothing", "--args", "(2.0,)"]) == 2
    assert "has no function 'Model.nothing'" in capsys.readouterr().err
    assert main(["emit", f"{tmp_path}:loss", "--args", "(2.0,)"]) == 2
    assert f"{tmp_path}: a directory" in capsys.readouterr().err


def test_a_traced_value_kept_after_its_trace_is_refused_when_passed_back_in():
    kept = []

    def f(x):
        kept.append(x)  # escapes: after the call it is a tracer of a finished trace
        return x * 2.0

    assert grad(f)(1.0) == 2.0
    here = _where(test_a_traced_value_kept_after_its_trace_is_refused_when_passed_back_in,
                  "x * x)" + "(kept")
    with pytest.raises(gradgen.GradgenError, match="from a trace that has ended") as info:
        grad(lambda x: x * x)(kept[0])  # was: a Tracer back instead of a float
    assert str(info.value).startswith(here + ": ")
    with pytest.raises(gradgen.GradgenError, match="from a trace that has ended"):
        gradgen.emit(lambda x: x * x, kept[0])
    with pytest.raises(gradgen.GradgenError, match="from a trace that has ended"):
        gradgen.vjp(lambda x: x * x, kept[0])


def mean_of(x):
    import statistics

    return statistics.mean([x, 2.0 * x])


def test_library_code_that_cannot_take_a_traced_value_is_named_at_the_users_line():
    with pytest.raises(gradgen.UnsupportedOperation) as info:
        grad(mean_of)(1.0)
    message = str(info.value)
    assert message.startswith(_where(mean_of, "statistics.mean(") + ": statistics.mean cannot "
                              "take a traced value")
    assert info.value.hint


def test_a_type_error_of_the_users_own_passes_through():
    def g(x):
        raise TypeError("the user's own")

    with pytest.raises(TypeError, match="the user's own"):
        grad(g)(1.0)


class InfiniteSlope(gradgen.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_values
        return g * np.inf * x  # the true slope is 2 x


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on sqrt(0) and sqrt(-h)
def test_check_reports_non_finite_gradients_as_agreement_or_as_the_worst_mismatch():
    report = gradgen.check(lambda x: np.sqrt(x), 0.0)  # inf, as sympy's derivative is there
    assert report.results[0].max_abs_error == 0.0  # was nan, which no tolerance catches
    with pytest.raises(gradgen.GradientMismatch, match="max abs error inf"):
        gradgen.check(lambda x: InfiniteSlope.apply(x), 0.5)


def test_a_cotangent_that_is_not_real_is_refused():
    _, pullback = gradgen.vjp(lambda x: x * 2.0, np.ones(3))
    with pytest.raises(gradgen.GradgenError, match="cotangent 0 is complex"):
        pullback(np.ones(3) * 1j)  # was: the imaginary part dropped, a zero gradient
    with pytest.raises(gradgen.GradgenError, match="cotangent 0 is a str"):
        pullback("1")
    np.testing.assert_array_equal(pullback(np.ones(3, dtype=int))[0], [2.0, 2.0, 2.0])


def test_check_refuses_a_negative_count_of_points():
    with pytest.raises(gradgen.GradgenError, match="points must be a count"):
        gradgen.check(lambda x: x * x, 1.0, points=-1)


def branch_on_an_array(x):
    if x > 0:
        return np.sum(x)
    return -np.sum(x)


def test_branching_on_a_whole_array_names_the_line_and_the_fix():
    with pytest.raises(gradgen.GradgenError) as info:
        grad(branch_on_an_array)(np.ones(2))
    message = str(info.value)
    assert message.startswith(_where(branch_on_an_array, "if x > 0") + ": ")
    assert "shape (2,) is ambiguous" in message and "np.where" in message
    assert isinstance(info.value, ValueError)  # what NumPy raises for it, still catchable
    assert grad(branch_on_an_array)(np.ones(1)) == 1.0  # one element: one decision, guarded
