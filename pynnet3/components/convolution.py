"""The old 2-D convolution and 3-D max-pooling components (simple components).

Kaldi's ConvolutionComponent and MaxpoolingComponent (nnet-combined-component.cc).
Each input row is a vectorized 3-D tensor (x, y, z); nothing depends on the
Index, so both are simple components.

- ConvolutionComponent: ``num_filters`` filters of size filt-x-dim x
  filt-y-dim x input-z-dim slide over x and y with the given steps (no
  padding); output column (patch * num_filters + filter), patch = x_step *
  num_y_steps + y_step. The input is vectorized "zyx" (z has stride 1,
  Kaldi's kZyx = 1) or "yzx" (y has stride 1, kYzx = 0).
- MaxpoolingComponent: max over pools of size pool-{x,y,z}-size moved by
  pool-{x,y,z}-step; input and output are "zyx" vectorized. In backprop the
  derivative goes to every input element equal to its pool's maximum.
"""

import numpy as np

from ..common.floats import f32
from ..common.parameter_stats import matrix_stats, vector_stats
from ..io.files import open_input
from .affine import ParameterArrays
from .base import Component, Field, P, UpdatableComponent, array_module, read_layout

# Kaldi's TensorVectorizationType.
kYzx = 0
kZyx = 1


class ConvolutionComponent(ParameterArrays, UpdatableComponent):
    """Kaldi's ConvolutionComponent (updatable, plain-gradient updates)."""

    type_name = "ConvolutionComponent"
    param_attrs = ("filter_params", "bias_params")
    layout = UpdatableComponent.UPDATABLE_COMMON + (
        Field("<InputXDim>", "int", "input_x_dim"),
        Field("<InputYDim>", "int", "input_y_dim"),
        Field("<InputZDim>", "int", "input_z_dim"),
        Field("<FiltXDim>", "int", "filt_x_dim"),
        Field("<FiltYDim>", "int", "filt_y_dim"),
        Field("<FiltXStep>", "int", "filt_x_step"),
        Field("<FiltYStep>", "int", "filt_y_step"),
        Field("<InputVectorization>", "int", "input_vectorization"),
        Field("<FilterParams>", "matrix", "filter_params"),
        Field("<BiasParams>", "vector", "bias_params"),
    )

    # -- description ----------------------------------------------------------
    def properties(self):
        return int(P.kSimpleComponent | P.kUpdatableComponent | P.kBackpropNeedsInput
                   | P.kBackpropAdds | P.kPropagateAdds)

    def _num_steps(self):
        return (1 + (self.input_x_dim - self.filt_x_dim) // self.filt_x_step,
                1 + (self.input_y_dim - self.filt_y_dim) // self.filt_y_step)

    def input_dim(self):
        return self.input_x_dim * self.input_y_dim * self.input_z_dim

    def output_dim(self):
        nx, ny = self._num_steps()
        return nx * ny * self.filter_params.shape[0]

    def info(self):
        s = self.updatable_info()
        s += (", input-x-dim=%d, input-y-dim=%d, input-z-dim=%d, filt-x-dim=%d, "
              "filt-y-dim=%d, filt-x-step=%d, filt-y-step=%d, input-vectorization=%d, "
              "num-filters=%d" % (self.input_x_dim, self.input_y_dim, self.input_z_dim,
                                  self.filt_x_dim, self.filt_y_dim, self.filt_x_step,
                                  self.filt_y_step, self.input_vectorization,
                                  self.filter_params.shape[0]))
        s += matrix_stats("filter-params", self.filter_params)
        s += vector_stats("bias-params", self.bias_params, include_mean=True)
        return s

    # -- initialization ---------------------------------------------------------
    def init_from_config(self, cfl):
        self.init_updatable_common(cfl)
        keys = ("input-x-dim", "input-y-dim", "input-z-dim", "filt-x-dim", "filt-y-dim",
                "filt-x-step", "filt-y-step")
        values = [cfl.get_int(k) for k in keys]
        if any(v is None for v in values):
            missing = [k for k, v in zip(keys, values) if v is None]
            raise cfl.error("bad initializer: missing %s" % " ".join(missing))
        (self.input_x_dim, self.input_y_dim, self.input_z_dim, self.filt_x_dim,
         self.filt_y_dim, self.filt_x_step, self.filt_y_step) = values
        order = cfl.get_str("input-vectorization-order", "zyx")
        if order == "zyx":
            self.input_vectorization = kZyx
        elif order == "yzx":
            self.input_vectorization = kYzx
        else:
            raise cfl.error("unknown or unsupported input vectorization order %s; accepted "
                            "candidates are 'yzx' and 'zyx'" % order)
        if min(values) <= 0:
            raise cfl.error("dimensions and steps must be positive")
        if (self.input_x_dim - self.filt_x_dim) % self.filt_x_step != 0 or \
                (self.input_y_dim - self.filt_y_dim) % self.filt_y_step != 0 or \
                self.filt_x_dim > self.input_x_dim or self.filt_y_dim > self.input_y_dim:
            raise cfl.error("filters must fit the input exactly: (input-x-dim - filt-x-dim) "
                            "must be a non-negative multiple of filt-x-step, and likewise "
                            "for y")
        filter_dim = self.filt_x_dim * self.filt_y_dim * self.input_z_dim
        matrix = cfl.get_str("matrix")
        if matrix is not None:
            mat = open_input(matrix).read_matrix()
            if mat.shape[1] != filter_dim + 1 or mat.shape[0] == 0:
                raise cfl.error("matrix %s has %d columns, expected filter dim + 1 = %d"
                                % (matrix, mat.shape[1], filter_dim + 1))
            self.filter_params = np.ascontiguousarray(mat[:, :filter_dim], dtype=np.float32)
            self.bias_params = np.ascontiguousarray(mat[:, filter_dim], dtype=np.float32)
        else:
            num_filters = cfl.get_int("num-filters")
            if num_filters is None or num_filters <= 0:
                raise cfl.error("bad initializer: num-filters must be given and positive")
            param_stddev = f32(cfl.get_float("param-stddev", 1.0 / np.sqrt(filter_dim)))
            bias_stddev = f32(cfl.get_float("bias-stddev", 1.0))
            if param_stddev < 0.0 or bias_stddev < 0.0:
                raise cfl.error("param-stddev and bias-stddev must be >= 0")
            self.filter_params = _randn((num_filters, filter_dim), param_stddev)
            self.bias_params = _randn(num_filters, bias_stddev)

    # -- serialization ------------------------------------------------------------
    def read_body(self, stream):
        start = stream.pos
        read_layout(self, stream, self.layout)
        # A trailing <IsGradient> overrides the header's; without it, false.
        self.is_gradient = False
        if stream.read_optional_token("<IsGradient>"):
            self.is_gradient = stream.read_bool()
        stream.expect_token("</%s>" % self.type_name)
        dims = (self.input_x_dim, self.input_y_dim, self.input_z_dim, self.filt_x_dim,
                self.filt_y_dim, self.filt_x_step, self.filt_y_step)
        if min(dims) <= 0 or self.input_vectorization not in (kZyx, kYzx):
            raise stream.error("ConvolutionComponent: bad dimensions or vectorization", start)
        if (self.filter_params.shape[1] != self.filt_x_dim * self.filt_y_dim * self.input_z_dim
                or self.bias_params.shape[0] != self.filter_params.shape[0]):
            raise stream.error("ConvolutionComponent: parameter sizes do not match the "
                               "filter dimensions", start)

    def write_body(self, stream):
        super().write_body(stream)
        stream.write_token("<IsGradient>")
        stream.write_bool(self.is_gradient)

    # -- computation ----------------------------------------------------------------------
    def _column_map(self):
        """Input column of each patch column (patch, x, y, z)."""
        nx, ny = self._num_steps()
        xs = (np.arange(nx)[:, None] * self.filt_x_step + np.arange(self.filt_x_dim)[None, :])
        ys = (np.arange(ny)[:, None] * self.filt_y_step + np.arange(self.filt_y_dim)[None, :])
        z = np.arange(self.input_z_dim)
        x = xs[:, None, :, None, None]
        y = ys[None, :, None, :, None]
        z = z[None, None, None, None, :]
        yz = self.input_y_dim * self.input_z_dim
        if self.input_vectorization == kZyx:
            cols = yz * x + self.input_z_dim * y + z
        else:
            cols = yz * x + self.input_y_dim * z + y
        return cols.reshape(nx * ny, -1)

    def _patches(self, xp, in_value):
        cols = self._column_map()
        return in_value[:, xp.asarray(cols.reshape(-1))].reshape(
            in_value.shape[0], cols.shape[0], cols.shape[1])

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        patches = self._patches(xp, in_value)
        w = xp.asarray(self.filter_params)
        b = xp.asarray(self.bias_params)
        res = patches @ w.T + b
        out += res.reshape(out.shape[0], -1)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi (propagate adds): AddVecToRows(1.0, bias) on every patch's
        # columns, then AddMatMatBatched (on the CPU one AddMatMat per patch).
        patches = self._patches(np, in_value)
        nf = self.filter_params.shape[0]
        for p in range(patches.shape[1]):
            kaldi.add_vec_to_rows(out[:, p * nf:(p + 1) * nf], 1.0, self.bias_params)
        for p in range(patches.shape[1]):
            kaldi.add_mat_mat(out[:, p * nf:(p + 1) * nf], 1.0,
                              np.ascontiguousarray(patches[:, p, :]), False, self.filter_params,
                              True, 1.0)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        xp = array_module(out_deriv)
        nf = self.filter_params.shape[0]
        od = out_deriv.reshape(out_deriv.shape[0], -1, nf)
        if in_deriv is not None:
            w = xp.asarray(self.filter_params)
            patch_derivs = od @ w
            cols = self._column_map()
            # Within one patch every input column appears once, so a fancy
            # "+=" per patch accumulates correctly.
            for p in range(cols.shape[0]):
                in_deriv[:, xp.asarray(cols[p])] += patch_derivs[:, p, :]
        if to_update is not None:
            to_update._update(xp, in_value, od)

    def _update(self, xp, in_value, od):
        """Plain step: params += learning_rate * gradient (Kaldi's Update)."""
        patches = self._patches(xp, in_value)
        grad = xp.einsum("npf,npd->fd", od, patches)
        bias_grad = od.sum(axis=(0, 1))
        lr = np.float32(self.learning_rate)
        w = xp.asarray(self.filter_params)
        b = xp.asarray(self.bias_params)
        w += lr * grad
        b += lr * bias_grad
        if not isinstance(w, np.ndarray):
            self.filter_params = w.get()
            self.bias_params = b.get()

    # -- parameters (scale, add, vectorize...: ParameterArrays) -------------------------
    def dot_product(self, other):
        return float(np.vdot(self.filter_params.astype(np.float64),
                             other.filter_params.astype(np.float64))
                     + np.dot(self.bias_params.astype(np.float64),
                              other.bias_params.astype(np.float64)))


def _randn(shape, stddev):
    if stddev == 0.0:
        return np.zeros(shape, dtype=np.float32)
    return (np.random.standard_normal(shape) * stddev).astype(np.float32)


class MaxpoolingComponent(Component):
    """Kaldi's MaxpoolingComponent (no parameters)."""

    type_name = "MaxpoolingComponent"
    layout = (
        Field("<InputXDim>", "int", "input_x_dim"),
        Field("<InputYDim>", "int", "input_y_dim"),
        Field("<InputZDim>", "int", "input_z_dim"),
        Field("<PoolXSize>", "int", "pool_x_size"),
        Field("<PoolYSize>", "int", "pool_y_size"),
        Field("<PoolZSize>", "int", "pool_z_size"),
        Field("<PoolXStep>", "int", "pool_x_step"),
        Field("<PoolYStep>", "int", "pool_y_step"),
        Field("<PoolZStep>", "int", "pool_z_step"),
    )
    _KEYS = ("input-x-dim", "input-y-dim", "input-z-dim", "pool-x-size", "pool-y-size",
             "pool-z-size", "pool-x-step", "pool-y-step", "pool-z-step")

    def properties(self):
        return int(P.kSimpleComponent | P.kBackpropNeedsInput | P.kBackpropNeedsOutput
                   | P.kBackpropAdds)

    def _num_pools(self):
        return (1 + (self.input_x_dim - self.pool_x_size) // self.pool_x_step,
                1 + (self.input_y_dim - self.pool_y_size) // self.pool_y_step,
                1 + (self.input_z_dim - self.pool_z_size) // self.pool_z_step)

    def input_dim(self):
        return self.input_x_dim * self.input_y_dim * self.input_z_dim

    def output_dim(self):
        nx, ny, nz = self._num_pools()
        return nx * ny * nz

    def info(self):
        return ("%s, input-x-dim=%d, input-y-dim=%d, input-z-dim=%d, pool-x-size=%d, "
                "pool-y-size=%d, pool-z-size=%d, pool-x-step=%d, pool-y-step=%d, "
                "pool-z-step=%d" % (self.type_name, self.input_x_dim, self.input_y_dim,
                                    self.input_z_dim, self.pool_x_size, self.pool_y_size,
                                    self.pool_z_size, self.pool_x_step, self.pool_y_step,
                                    self.pool_z_step))

    def _problem(self):
        """Kaldi's Check(): None if the sizes are consistent, else what is wrong."""
        for axis in "xyz":
            dim = getattr(self, "input_%s_dim" % axis)
            size = getattr(self, "pool_%s_size" % axis)
            step = getattr(self, "pool_%s_step" % axis)
            if dim <= 0 or size <= 0 or step <= 0:
                return "input-%s-dim, pool-%s-size and pool-%s-step must be positive" % (
                    axis, axis, axis)
            if dim < size:
                return "pool-%s-size %d exceeds input-%s-dim %d" % (axis, size, axis, dim)
            if size < step:
                return "pool-%s-step %d exceeds pool-%s-size %d" % (axis, step, axis, size)
            if (dim - size) % step != 0:
                return ("input-%s-dim - pool-%s-size must be a multiple of pool-%s-step"
                        % (axis, axis, axis))
        return None

    def init_from_config(self, cfl):
        values = [cfl.get_int(k) for k in self._KEYS]
        if any(v is None for v in values):
            missing = [k for k, v in zip(self._KEYS, values) if v is None]
            raise cfl.error("bad initializer: missing %s" % " ".join(missing))
        for field, value in zip(self.layout, values):
            setattr(self, field.attr, value)
        problem = self._problem()
        if problem:
            raise cfl.error("MaxpoolingComponent: " + problem)

    def read_body(self, stream):
        start = stream.pos
        super().read_body(stream)
        problem = self._problem()
        if problem:
            raise stream.error("MaxpoolingComponent: " + problem, start)

    def _column_map(self):
        """(pool_size, num_pools) input columns: member q of each pool."""
        nx, ny, nz = self._num_pools()
        px = np.arange(nx)[:, None] * self.pool_x_step + np.arange(self.pool_x_size)[None, :]
        py = np.arange(ny)[:, None] * self.pool_y_step + np.arange(self.pool_y_size)[None, :]
        pz = np.arange(nz)[:, None] * self.pool_z_step + np.arange(self.pool_z_size)[None, :]
        # axes: (x, y, z, x_pool, y_pool, z_pool)
        x = px.T[:, None, None, :, None, None]
        y = py.T[None, :, None, None, :, None]
        z = pz.T[None, None, :, None, None, :]
        cols = (x * self.input_y_dim + y) * self.input_z_dim + z
        return cols.reshape(self.pool_x_size * self.pool_y_size * self.pool_z_size, nx * ny * nz)

    def propagate(self, indexes, in_value, out):
        xp = array_module(in_value)
        cols = self._column_map()
        patches = in_value[:, xp.asarray(cols.reshape(-1))].reshape(
            in_value.shape[0], cols.shape[0], cols.shape[1])
        out[...] = patches.max(axis=1)
        return None

    kaldi_exact = True

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        # Kaldi: out = -1e20, then out = std::max(out, patch) pool position
        # by pool position (the old value is kept unless it is smaller).
        cols = self._column_map()
        out[...] = np.float32(-1e20)
        for q in range(cols.shape[0]):
            patch = in_value[:, cols[q]]
            np.copyto(out, patch, where=out < patch)
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if in_deriv is None:
            return
        xp = array_module(in_value)
        cols = self._column_map()
        for q in range(cols.shape[0]):
            c = xp.asarray(cols[q])
            mask = (in_value[:, c] == out_value).astype(in_value.dtype)
            # Pools may overlap, so a column can appear twice within member q
            # only if two pools share it at the same position: impossible,
            # since pool starts differ. One fancy "+=" per member is exact.
            in_deriv[:, c] += mask * out_deriv
