"""Affine and linear components: AffineComponent, NaturalGradientAffineComponent,
LinearComponent, FixedAffineComponent.

Also the helpers the other parameterized component families share
(:class:`ParameterArrays`, :func:`randn`, matrix/vector loading for ``matrix=``
style config keys, natural-gradient option checks).

Guarantees:
- Reading accepts everything Kaldi's Read() accepts, including tokens only
  older Kaldi versions wrote (``<IsGradient>`` after the parameters,
  ``<MaxChangePerSample>``, ``<UpdateCount>``...); writing is byte-identical
  to Kaldi's Write() in both modes.
- ``init_from_config`` accepts exactly the keys Kaldi's InitFromConfig accepts,
  with Kaldi's defaults; random initialization follows Kaldi's
  distributions (Gaussian, scaled by ``param-stddev`` / ``bias-stddev``,
  shifted by ``bias-mean``), sampled from the components' random source so
  that ``kaldi_random.seed`` makes it reproducible (Kaldi's own sequence of
  random numbers cannot be reproduced).
- ``info()`` is Kaldi's Info() text, parameter statistics included.
- Natural-gradient components keep their OnlineNaturalGradient options
  (ranks, update period, samples history, alpha) for I/O and Info(); their
  update is the plain gradient step (no preconditioning).
"""

import numpy as np

from . import kaldi_random
from ..common.floats import f32, kaldi_str
from ..common.parameter_stats import get_verbose_level, matrix_stats, vector_stats
from ..errors import NnetError, PynnetError
from ..io.files import open_input
from .base import Component, Field, P, UpdatableComponent, array_module, read_layout, write_layout
from .products import few_rows_product

# --------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------


def randn(*shape):
    """Standard-normal float32 samples of a given shape (Kaldi's SetRandn),
    from the components' seedable random source (``kaldi_random.seed``)."""
    count = int(np.prod(shape, dtype=np.int64))
    return kaldi_random.normal_vector(count).astype(np.float32).reshape(shape)


def gaussian(shape, stddev, mean=0.0):
    """Kaldi's ``SetRandn(); Scale(stddev); Add(mean)`` as float32. A zero
    ``stddev`` gives exactly +0 (BLAS scaling by 0 writes zeros, never -0),
    so such components are deterministic, as in Kaldi."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if stddev == 0.0:
        values = np.zeros(shape, np.float32)
    else:
        values = randn(*shape) * np.float32(stddev)
    if mean != 0.0:
        values += np.float32(mean)
    return values


def _load(cfl, key, what):
    filename = cfl.get_str(key)
    try:
        stream = open_input(filename)
        if what == "matrix":
            value = stream.read_matrix()
        else:
            value = stream.read_vector()
    except PynnetError as e:
        raise cfl.error("could not read a %s from %s='%s': %s" % (what, key, filename, e)) from None
    return value


def load_config_matrix(cfl, key):
    """Reads the Kaldi matrix named by config key ``key`` (an rxfilename)."""
    return np.ascontiguousarray(_load(cfl, key, "matrix"), dtype=np.float32)


def load_config_vector(cfl, key):
    """Reads the Kaldi vector named by config key ``key`` (an rxfilename)."""
    return np.ascontiguousarray(_load(cfl, key, "vector"), dtype=np.float32)


def check_natural_gradient_options(error, rank=None, update_period=None,
                                   num_samples_history=None, alpha=None):
    """The checks of OnlineNaturalGradient's setters; ``error(msg)`` makes the
    exception to raise (a ConfigError or KaldiFormatError maker)."""
    if rank is not None and rank <= 0:
        raise error("natural-gradient rank must be positive, got %d" % rank)
    if update_period is not None and update_period <= 0:
        raise error("update-period must be positive, got %d" % update_period)
    if num_samples_history is not None and not 0.0 < num_samples_history < 1.0e+6:
        raise error("num-samples-history must be in (0, 1e6), got %s"
                    % kaldi_str(num_samples_history))
    if alpha is not None and not alpha >= 0.0:
        raise error("alpha must be >= 0, got %s" % kaldi_str(alpha))


def check_in_out_natural_gradient(comp, error):
    """check_natural_gradient_options for a component with ``rank_in``,
    ``rank_out``, ``update_period``, ``num_samples_history`` and ``alpha``."""
    check_natural_gradient_options(error, comp.rank_in, comp.update_period,
                                   comp.num_samples_history, comp.alpha)
    check_natural_gradient_options(error, comp.rank_out)


def init_in_out_natural_gradient(comp, cfl):
    """The natural-gradient config keys of such a component, with Kaldi's
    defaults: num-samples-history (2000), alpha (4), rank-in
    (min(20, (input-dim+1)/2)), rank-out (min(80, (output-dim+1)/2)),
    update-period (4); then checked."""
    comp.num_samples_history = f32(cfl.get_float("num-samples-history", 2000.0))
    comp.alpha = f32(cfl.get_float("alpha", 4.0))
    rank_in = cfl.get_int("rank-in", -1)
    rank_out = cfl.get_int("rank-out", -1)
    comp.update_period = cfl.get_int("update-period", 4)
    comp.rank_in = rank_in if rank_in >= 0 else min(20, (comp.input_dim() + 1) // 2)
    comp.rank_out = rank_out if rank_out >= 0 else min(80, (comp.output_dim() + 1) // 2)
    check_in_out_natural_gradient(comp, cfl.error)


def in_out_natural_gradient_problem(comp):
    """What check_in_out_natural_gradient objects to, or None."""
    try:
        check_in_out_natural_gradient(comp, ValueError)
    except ValueError as e:
        return str(e)
    return None


def check_positive(cfl, **values):
    """Raises ConfigError naming the first key whose value is not positive."""
    for key, value in values.items():
        if value is None or value <= 0:
            raise cfl.error("%s must be positive, got %s" % (key.replace("_", "-"), value))


def to_module(array, like):
    """``array`` on the same device (NumPy or CuPy) as ``like``."""
    xp = array_module(like)
    if array_module(array) is xp:
        return array
    if xp is np:
        return array.get()
    return xp.asarray(array)


def add_scaled(param, alpha, delta):
    """``param += alpha * delta`` in place, in float32, whatever device
    ``delta`` was computed on."""
    delta = to_module(delta, param)
    param += delta * param.dtype.type(alpha)


def read_legacy_is_gradient(comp, stream):
    """Older Kaldi wrote ``<IsGradient>`` after the parameters; read it if present."""
    if stream.peek_token() == "<IsGradient>":
        stream.read_token()
        comp.is_gradient = stream.read_bool()


def row_sum(xp, mat):
    """Sum over rows of a 2-D float32 array, as a float32 vector."""
    return mat.sum(axis=0, dtype=xp.float32)


def affine_propagate_kaldi_exact(kaldi, bias, linear, in_value, out):
    """Kaldi's affine Propagate with Kaldi's arithmetic: every row of ``out``
    set to the bias (CopyRowsFromVec), then ``out.AddMatMat(1.0, in,
    kNoTrans, linear, kTrans, 1.0)``, so each block of the product is added
    onto the bias (not the bias onto the finished product)."""
    out[...] = bias
    kaldi.add_mat_mat(out, 1.0, in_value, False, linear, True, 1.0)
    return None


class AffineTransform:
    """The dimensions and the propagation of y = W x + b, for components
    holding W as ``linear_params`` (output-dim x input-dim) and b as
    ``bias_params`` (AffineComponent and its subclasses, FixedAffineComponent)."""

    def input_dim(self):
        return int(self.linear_params.shape[1])

    def output_dim(self):
        return int(self.linear_params.shape[0])

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        few_rows_product(xp, in_value, xp.asarray(self.linear_params).T, out)   # no temporary
        out += xp.asarray(self.bias_params)
        return None

    def propagate_deferring_bias(self, indexes, in_value, out):
        """Propagate without adding the bias: returns it, for the caller to
        add (fused with what follows)."""
        xp = array_module(in_value)
        few_rows_product(xp, in_value, xp.asarray(self.linear_params).T, out)
        return xp.asarray(self.bias_params)

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        return affine_propagate_kaldi_exact(kaldi, self.bias_params, self.linear_params,
                                            in_value, out)


class ParameterArrays:
    """Scale/Add/Vectorize/... for components whose parameters are a fixed
    list of float32 arrays (``param_attrs``, in Kaldi's Vectorize order:
    matrices row by row, then vectors)."""

    param_attrs = ()

    def parameter_arrays(self):
        return [getattr(self, a) for a in self.param_attrs]

    def _check_other(self, other, what):
        if not isinstance(other, type(self)) and not isinstance(self, type(other)):
            raise NnetError("%s: cannot %s a %s" % (self.type_name, what,
                                                    getattr(other, "type_name", type(other))))
        for a in self.param_attrs:
            if getattr(self, a).shape != getattr(other, a).shape:
                raise NnetError("%s: cannot %s a component with different dimensions"
                                % (self.type_name, what))

    def scale(self, alpha):
        """Kaldi's Scale(); scaling by 0 sets exactly zero (clearing NaN/inf)."""
        for p in self.parameter_arrays():
            if alpha == 0.0:
                p[...] = 0.0
            else:
                p *= p.dtype.type(alpha)

    def add(self, alpha, other):
        self._check_other(other, "add")
        for a in self.param_attrs:
            add_scaled(getattr(self, a), alpha, getattr(other, a))

    def num_parameters(self):
        return int(sum(p.size for p in self.parameter_arrays()))

    def vectorize(self):
        arrays = self.parameter_arrays()
        if not arrays:
            return np.zeros(0, dtype=np.float32)
        xp = array_module(arrays[0])
        return xp.concatenate([p.ravel() for p in arrays]).astype(xp.float32, copy=False)

    def unvectorize(self, params):
        if len(params) != self.num_parameters():
            raise NnetError("%s: unvectorize needs %d parameters, got %d"
                            % (self.type_name, self.num_parameters(), len(params)))
        offset = 0
        for p in self.parameter_arrays():
            n = p.size
            p[...] = to_module(params[offset:offset + n], p).reshape(p.shape)
            offset += n

    def dot_product(self, other):
        self._check_other(other, "take a dot product with")
        total = 0.0
        for a in self.param_attrs:
            x = getattr(self, a)
            y = to_module(getattr(other, a), x)
            total += float((x.astype(np.float64) * y.astype(np.float64)).sum())
        return f32(total)

    def perturb_params(self, stddev):
        """Kaldi's PerturbParams: adds Gaussian noise of standard deviation ``stddev``."""
        for p in self.parameter_arrays():
            add_scaled(p, stddev, randn(*p.shape))


class ReadSteps:
    """Reading driven by ``read_steps``: a sequence of Fields (read as the
    layout reader does) and functions ``f(comp, stream)`` for tokens with
    irregular rules; then the closing tag and :meth:`check` (which may raise
    a format error naming the start of the component)."""

    read_steps = None

    def read_body(self, stream):
        start = stream.pos
        steps = self.read_steps if self.read_steps is not None else self.layout
        for step in steps:
            if isinstance(step, Field):
                read_layout(self, stream, (step,))
            else:
                step(self, stream)
        self.read_closing_tag(stream)
        problem = self.check()
        if problem:
            raise stream.error("%s: %s" % (self.type_name, problem), start)

    def read_closing_tag(self, stream):
        stream.expect_token("</%s>" % self.type_name)

    def check(self):
        """A description of an inconsistency, or None."""
        return None


# --------------------------------------------------------------------------
# AffineComponent
# --------------------------------------------------------------------------

_LINEAR = Field("<LinearParams>", "matrix", "linear_params")
_BIAS = Field("<BiasParams>", "vector", "bias_params")
_ORTHONORMAL = Field("<OrthonormalConstraint>", "float", "orthonormal_constraint",
                     optional=True, default=0.0,
                     write_if=lambda c: c.orthonormal_constraint != 0.0)


class AffineComponent(AffineTransform, ReadSteps, ParameterArrays, UpdatableComponent):
    """y = W x + b, with trainable W (output-dim x input-dim) and b."""

    type_name = "AffineComponent"
    param_attrs = ("linear_params", "bias_params")
    layout = UpdatableComponent.UPDATABLE_COMMON + (_LINEAR, _BIAS, _ORTHONORMAL)
    read_steps = UpdatableComponent.UPDATABLE_COMMON + (
        _LINEAR, _BIAS, read_legacy_is_gradient, _ORTHONORMAL)

    def __init__(self, linear_params=None, bias_params=None, learning_rate=0.001):
        self.learning_rate = f32(learning_rate)
        self.learning_rate_factor = 1.0
        self.is_gradient = False
        self.max_change = 0.0
        self.l2_regularize = 0.0
        self.orthonormal_constraint = 0.0
        self.linear_params = (np.zeros((0, 0), np.float32) if linear_params is None
                              else np.array(linear_params, dtype=np.float32))
        self.bias_params = (np.zeros(self.linear_params.shape[0], np.float32)
                            if bias_params is None else np.array(bias_params, dtype=np.float32))

    def check(self):
        if self.bias_params.shape[0] != self.linear_params.shape[0]:
            return ("<BiasParams> has dimension %d but <LinearParams> has %d rows"
                    % (self.bias_params.shape[0], self.linear_params.shape[0]))
        return None

    # -- configuration ------------------------------------------------------
    def _init_params_from_config(self, cfl, accept_bias_mean):
        """Kaldi's matrix= or input-dim/output-dim/param-stddev/bias-stddev[/bias-mean]."""
        if cfl.has("matrix"):
            mat = load_config_matrix(cfl, "matrix")
            if mat.shape[1] < 2 or mat.shape[0] < 1:
                raise cfl.error("matrix= must have at least 1 row and 2 columns (the last "
                                "column is the bias), got %dx%d" % mat.shape)
            self.linear_params = np.ascontiguousarray(mat[:, :-1])
            self.bias_params = np.ascontiguousarray(mat[:, -1])
            for key, have in (("input-dim", self.input_dim()),
                              ("output-dim", self.output_dim())):
                value = cfl.get_int(key)
                if value is not None and value != have:
                    raise cfl.error("%s=%d does not match the matrix (%d)" % (key, value, have))
            return
        input_dim = cfl.require("input-dim", "int")
        output_dim = cfl.require("output-dim", "int")
        check_positive(cfl, input_dim=input_dim, output_dim=output_dim)
        param_stddev = f32(cfl.get_float("param-stddev", 1.0 / np.sqrt(input_dim)))
        bias_stddev = f32(cfl.get_float("bias-stddev", 1.0))
        bias_mean = f32(cfl.get_float("bias-mean", 0.0)) if accept_bias_mean else 0.0
        if param_stddev < 0.0:
            raise cfl.error("param-stddev must be >= 0")
        if accept_bias_mean and bias_stddev < 0.0:
            raise cfl.error("bias-stddev must be >= 0")
        self.linear_params = gaussian((output_dim, input_dim), param_stddev)
        self.bias_params = gaussian(output_dim, bias_stddev, bias_mean)

    def init_from_config(self, cfl):
        """Keys: learning-rate, learning-rate-factor, max-change, l2-regularize;
        matrix= (W with b as last column) or input-dim, output-dim,
        param-stddev (1/sqrt(input-dim)), bias-stddev (1.0); orthonormal-constraint."""
        self.__init__()
        self.init_updatable_common(cfl)
        self._check_updatable_common(cfl)
        self._init_params_from_config(cfl, accept_bias_mean=False)
        self.orthonormal_constraint = f32(cfl.get_float("orthonormal-constraint", 0.0))

    def _check_updatable_common(self, cfl):
        if self.max_change < 0.0 or self.l2_regularize < 0.0:
            raise cfl.error("max-change and l2-regularize must be >= 0")

    # -- description --------------------------------------------------------
    def properties(self):
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput
                   | P.kBackpropAdds)

    def info(self):
        s = self.updatable_info()
        if self.orthonormal_constraint != 0.0:
            s += ", orthonormal-constraint=" + kaldi_str(self.orthonormal_constraint)
        s += matrix_stats("linear-params", self.linear_params, False, True, True,
                          get_verbose_level() >= 2)
        s += vector_stats("bias", self.bias_params, True)
        return s

    # -- computation --------------------------------------------------------
    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        if in_deriv is not None:
            in_deriv += xp.matmul(out_deriv, xp.asarray(self.linear_params))
        if to_update is not None:
            # The plain gradient step; natural-gradient subclasses take it too
            # (no preconditioning in pynnet3).
            to_update.update_simple(in_value, out_deriv)

    def update_simple(self, in_value, out_deriv):
        """Kaldi's UpdateSimple: W += lr * out_deriv^T in_value, b += lr * column sums."""
        xp = array_module(out_deriv)
        add_scaled(self.bias_params, self.learning_rate, row_sum(xp, out_deriv))
        add_scaled(self.linear_params, self.learning_rate, xp.matmul(out_deriv.T, in_value))

    def set_params(self, bias, linear):
        """Kaldi's SetParams."""
        self.bias_params = np.array(bias, dtype=np.float32)
        self.linear_params = np.array(linear, dtype=np.float32)
        if self.bias_params.shape[0] != self.linear_params.shape[0]:
            raise NnetError("AffineComponent.set_params: bias dim %d != rows %d"
                            % (self.bias_params.shape[0], self.linear_params.shape[0]))

    def resize(self, input_dim, output_dim):
        """Kaldi's Resize: new zero parameters of the given dimensions."""
        if input_dim <= 0 or output_dim <= 0:
            raise NnetError("AffineComponent.resize: dimensions must be positive")
        self.linear_params = np.zeros((output_dim, input_dim), np.float32)
        self.bias_params = np.zeros(output_dim, np.float32)


# --------------------------------------------------------------------------
# NaturalGradientAffineComponent
# --------------------------------------------------------------------------

def _read_ng_affine_tail(comp, stream):
    """The tokens after <Alpha>, some only written by old Kaldi versions."""
    if stream.peek_token() == "<MaxChangePerSample>":
        stream.read_token()
        stream.read_float()
    read_legacy_is_gradient(comp, stream)
    if stream.peek_token() == "<UpdateCount>":
        stream.read_token()
        stream.read_double()
        stream.expect_token("<ActiveScalingCount>")
        stream.read_double()
        stream.expect_token("<MaxChangeScaleStats>")
        stream.read_double()


class NaturalGradientAffineComponent(AffineComponent):
    """AffineComponent trained (in Kaldi) with natural gradient; here the
    preconditioner's options are kept for I/O and Info()."""

    type_name = "NaturalGradientAffineComponent"
    layout = UpdatableComponent.UPDATABLE_COMMON + (
        _LINEAR, _BIAS,
        Field("<RankIn>", "int", "rank_in"),
        Field("<RankOut>", "int", "rank_out"),
        _ORTHONORMAL,
        Field("<UpdatePeriod>", "int", "update_period"),
        Field("<NumSamplesHistory>", "float", "num_samples_history"),
        Field("<Alpha>", "float", "alpha"),
    )
    read_steps = layout + (_read_ng_affine_tail,)

    def __init__(self, linear_params=None, bias_params=None):
        super().__init__(linear_params, bias_params, 0.001)
        # Kaldi's constructor defaults (InitFromConfig picks its own).
        self.rank_in = 20
        self.rank_out = 80
        self.update_period = 4
        self.num_samples_history = 2000.0
        self.alpha = 4.0

    def read_closing_tag(self, stream):
        # Kaldi accepts any token containing "NaturalGradientAffineComponent>".
        start = stream.pos
        token = stream.read_token()
        if token not in ("</NaturalGradientAffineComponent>", "<NaturalGradientAffineComponent>"):
            raise stream.error("expected </NaturalGradientAffineComponent>, got '%s'" % token,
                               start)

    def check(self):
        return super().check() or in_out_natural_gradient_problem(self)

    def init_from_config(self, cfl):
        """AffineComponent's keys plus bias-mean (0.0) and the natural-gradient
        options num-samples-history (2000), alpha (4), rank-in
        (min(20, (input-dim+1)/2)), rank-out (min(80, (output-dim+1)/2)),
        update-period (4)."""
        self.__init__()
        self.init_updatable_common(cfl)
        self._check_updatable_common(cfl)
        self._init_params_from_config(cfl, accept_bias_mean=True)
        self.orthonormal_constraint = f32(cfl.get_float("orthonormal-constraint", 0.0))
        init_in_out_natural_gradient(self, cfl)

    def info(self):
        return super().info() + (
            ", rank-in=%d, rank-out=%d, num-samples-history=%s, update-period=%d, alpha=%s"
            % (self.rank_in, self.rank_out, kaldi_str(self.num_samples_history),
               self.update_period, kaldi_str(self.alpha)))


# --------------------------------------------------------------------------
# LinearComponent
# --------------------------------------------------------------------------

def _read_rank_in_out(comp, stream):
    stream.expect_token("<RankInOut>")
    comp.rank_in = stream.read_int32()
    comp.rank_out = stream.read_int32()


class LinearComponent(ReadSteps, ParameterArrays, UpdatableComponent):
    """y = W x (no bias), trainable W; output is *added* (kPropagateAdds)."""

    type_name = "LinearComponent"
    param_attrs = ("params",)
    _HEAD = UpdatableComponent.UPDATABLE_COMMON[:-1] + (
        Field("<LearningRate>", "float", "learning_rate"),
        Field("<Params>", "matrix", "params"),
        _ORTHONORMAL,
        Field("<UseNaturalGradient>", "bool", "use_natural_gradient"),
    )
    _TAIL = (
        Field("<Alpha>", "float", "alpha"),
        Field("<NumSamplesHistory>", "float", "num_samples_history"),
        Field("<UpdatePeriod>", "int", "update_period"),
    )
    read_steps = _HEAD + (_read_rank_in_out,) + _TAIL

    def __init__(self, params=None):
        super().__init__()
        self.params = (np.zeros((0, 0), np.float32) if params is None
                       else np.array(params, dtype=np.float32))
        self.orthonormal_constraint = 0.0
        self.use_natural_gradient = True
        # Kaldi's LinearComponent(params) constructor defaults.
        self.rank_in = 40
        self.rank_out = 80
        self.update_period = 4
        self.num_samples_history = 2000.0
        self.alpha = 4.0

    def write_body(self, stream):
        write_layout(self, stream, self._HEAD)
        stream.write_token("<RankInOut>")
        stream.write_int32(self.rank_in)
        stream.write_int32(self.rank_out)
        write_layout(self, stream, self._TAIL)

    def check(self):
        return in_out_natural_gradient_problem(self)

    def init_from_config(self, cfl):
        """Keys: the learning-rate keys; matrix= (W itself) or input-dim,
        output-dim, param-stddev (1/sqrt(input-dim)); orthonormal-constraint;
        use-natural-gradient (true), rank-in, rank-out, update-period (4),
        num-samples-history (2000), alpha (4)."""
        self.__init__()
        self.init_updatable_common(cfl)
        if self.max_change < 0.0 or self.l2_regularize < 0.0:
            raise cfl.error("max-change and l2-regularize must be >= 0")
        if cfl.has("matrix"):
            self.params = load_config_matrix(cfl, "matrix")
            if self.params.shape[0] == 0:
                raise cfl.error("matrix= is empty")
            for key, have in (("input-dim", self.input_dim()),
                              ("output-dim", self.output_dim())):
                value = cfl.get_int(key)
                if value is not None and value != have:
                    raise cfl.error("%s=%d does not match the matrix (%d)" % (key, value, have))
        else:
            input_dim = cfl.require("input-dim", "int")
            output_dim = cfl.require("output-dim", "int")
            check_positive(cfl, input_dim=input_dim, output_dim=output_dim)
            param_stddev = f32(cfl.get_float("param-stddev", 1.0 / np.sqrt(input_dim)))
            if param_stddev < 0.0:
                raise cfl.error("param-stddev must be >= 0")
            self.params = gaussian((output_dim, input_dim), param_stddev)
        self.use_natural_gradient = cfl.get_bool("use-natural-gradient", True)
        init_in_out_natural_gradient(self, cfl)
        self.orthonormal_constraint = f32(cfl.get_float("orthonormal-constraint", 0.0))

    def properties(self):
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput
                   | P.kPropagateAdds | P.kBackpropAdds)

    def input_dim(self):
        return int(self.params.shape[1])

    def output_dim(self):
        return int(self.params.shape[0])

    def info(self):
        s = self.updatable_info()
        s += matrix_stats("params", self.params, False, True, True, get_verbose_level() >= 2)
        if self.orthonormal_constraint != 0.0:
            s += ", orthonormal-constraint=" + kaldi_str(self.orthonormal_constraint)
        s += (", use-natural-gradient=%s, rank-in=%d, rank-out=%d, num-samples-history=%s, "
              "update-period=%d, alpha=%s"
              % (kaldi_str(bool(self.use_natural_gradient)), self.rank_in, self.rank_out,
                 kaldi_str(self.num_samples_history), self.update_period,
                 kaldi_str(self.alpha)))
        return s

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        out += xp.matmul(in_value, xp.asarray(self.params).T)
        return None

    def propagate_overwriting(self, indexes, in_value, out):
        """Propagate into an ``out`` whose old values do not count (as if it
        held zeros), one pass less than zeroing it."""
        xp = array_module(in_value)
        xp.matmul(in_value, xp.asarray(self.params).T, out=out)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: out.AddMatMat(1.0, in, kNoTrans, params, kTrans, 1.0).
        kaldi.add_mat_mat(out, 1.0, in_value, False, self.params, True, 1.0)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        if in_deriv is not None:
            in_deriv += xp.matmul(out_deriv, xp.asarray(self.params))
        if to_update is not None:
            add_scaled(to_update.params, to_update.learning_rate,
                       xp.matmul(out_deriv.T, in_value))


# --------------------------------------------------------------------------
# FixedAffineComponent
# --------------------------------------------------------------------------

class FixedAffineComponent(AffineTransform, ReadSteps, Component):
    """y = W x + b with W, b fixed at initialization (e.g. an LDA matrix)."""

    type_name = "FixedAffineComponent"
    layout = (_LINEAR, _BIAS)

    def __init__(self, linear_params=None, bias_params=None):
        self.linear_params = (np.zeros((0, 0), np.float32) if linear_params is None
                              else np.array(linear_params, dtype=np.float32))
        self.bias_params = (np.zeros(self.linear_params.shape[0], np.float32)
                            if bias_params is None else np.array(bias_params, dtype=np.float32))

    @classmethod
    def from_affine(cls, affine):
        """Kaldi's FixedAffineComponent(const AffineComponent&)."""
        return cls(affine.linear_params, affine.bias_params)

    def check(self):
        if self.bias_params.shape[0] != self.linear_params.shape[0]:
            return ("<BiasParams> has dimension %d but <LinearParams> has %d rows"
                    % (self.bias_params.shape[0], self.linear_params.shape[0]))
        return None

    def init_from_config(self, cfl):
        """``matrix=<rxfilename>`` (W with b as its last column) alone, or
        input-dim/output-dim (unit-Gaussian W and b, for testing)."""
        if cfl.has("matrix"):
            # Any other key stays unused, so the caller's check_all_used()
            # rejects it, as Kaldi does.
            mat = load_config_matrix(cfl, "matrix")
            if mat.shape[0] == 0 or mat.shape[1] < 2:
                raise cfl.error("matrix= must have at least 1 row and 2 columns, got %dx%d"
                                % mat.shape)
        else:
            input_dim = cfl.require("input-dim", "int")
            output_dim = cfl.require("output-dim", "int")
            check_positive(cfl, input_dim=input_dim, output_dim=output_dim)
            mat = randn(output_dim, input_dim + 1)
        self.linear_params = np.ascontiguousarray(mat[:, :-1])
        self.bias_params = np.ascontiguousarray(mat[:, -1])

    def properties(self):
        return int(P.kSimpleComponent | P.kBackpropAdds)

    def info(self):
        return (Component.info(self) + matrix_stats("linear-params", self.linear_params)
                + vector_stats("bias", self.bias_params, True))

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is not None:
            xp = array_module(out_deriv)
            in_deriv += xp.matmul(out_deriv, xp.asarray(self.linear_params))


__all__ = ["AffineComponent", "NaturalGradientAffineComponent", "LinearComponent",
           "FixedAffineComponent", "AffineTransform", "ParameterArrays", "ReadSteps", "randn",
           "gaussian", "f32", "affine_propagate_kaldi_exact", "add_scaled", "load_config_matrix",
           "load_config_vector", "check_natural_gradient_options", "read_legacy_is_gradient"]
