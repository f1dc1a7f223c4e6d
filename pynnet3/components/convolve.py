"""Running a ConvolutionComputation: Kaldi's ConvolveForward,
ConvolveBackwardData and ConvolveBackwardParams (nnet3/convolution.cc).

Each step of the computation is a column gather of the (reshaped) input into a
temporary matrix and one matrix product with a column block of the
parameters, done in row chunks when the temporary matrix would exceed the
computation's memory limit.

Guarantees: :func:`convolve_forward`, :func:`convolve_backward_data` and
:func:`convolve_backward_params` compute what Kaldi's functions of those
names compute (they add to their output), on NumPy or CuPy arrays.
"""

from ..errors import ComputationError
from .base import array_module


def _gather(xp, cc, part, step):
    """The step's temporary matrix: part's column blocks in height_map order,
    zero blocks where height_map is -1 (Kaldi's CopyCols with step.columns),
    or the plain column range when the map is contiguous."""
    rows = part.shape[0]
    ncols = len(step.columns)
    if step.columns_are_contiguous:
        if ncols == part.shape[1]:
            return part
        return xp.ascontiguousarray(part[:, step.first_column:step.first_column + ncols])
    src = part.reshape(rows, cc.height_in, cc.num_filters_in)
    temp = xp.take(src, xp.asarray(step.height_sources), axis=1)
    if step.zero_heights.size:
        temp[:, xp.asarray(step.zero_heights), :] = 0
    return temp.reshape(rows, ncols)


def _params_part(xp, params, step, pcols):
    return xp.ascontiguousarray(params[:, step.params_start_col:step.params_start_col + pcols])


def _reshape_input(cc, mat, what):
    rows = mat.shape[0]
    required = cc.num_images * cc.num_t_in
    if rows == required:
        return mat
    if required == 0 or rows % required != 0:
        raise ComputationError("convolution: %s has %d rows, expected a multiple of %d"
                               % (what, rows, required))
    return mat.reshape(required, mat.shape[1] * (rows // required))


def _chunks(cc, input_rows):
    """(t_start, this_num_t_out) pieces Kaldi splits the computation into."""
    if cc.temp_rows != 0 and cc.temp_rows != input_rows:
        per_chunk = cc.temp_rows // cc.num_images
        return [(t, min(cc.num_t_out - t, per_chunk)) for t in range(0, cc.num_t_out, per_chunk)]
    return [(0, cc.num_t_out)]


def _check_shapes(cc, in_mat, params, out_mat):
    if params.shape[0] != cc.num_filters_out:
        raise ComputationError("convolution: parameter rows %d != num-filters-out %d"
                               % (params.shape[0], cc.num_filters_out))
    if out_mat.shape != (cc.num_t_out * cc.num_images, cc.height_out * cc.num_filters_out):
        raise ComputationError("convolution: output is %dx%d, expected %dx%d" % (
            out_mat.shape + (cc.num_t_out * cc.num_images, cc.height_out * cc.num_filters_out)))
    if in_mat.shape[0] * in_mat.shape[1] != (cc.num_images * cc.num_t_in * cc.height_in
                                             * cc.num_filters_in):
        raise ComputationError("convolution: input of %dx%d does not fit the computation"
                               % in_mat.shape)


def _step_blocks(cc, inp, out):
    """The blocks the three convolution functions work on, in Kaldi's order:
    for each chunk of output times (Kaldi's memory-limited chunking) and each
    step, ``(step, rows of inp the step reads, the chunk's rows of out viewed
    as (rows * height_out, num_filters_out), rows, params columns)``.
    ``inp`` is the (rows-per-time-reshaped) input or input derivative, ``out``
    the output or output derivative; the views share their memory."""
    ni, ho = cc.num_images, cc.height_out
    extra = cc.num_t_in - cc.num_t_out
    for t_start, n_t in _chunks(cc, inp.shape[0]):
        in_chunk = inp[t_start * ni:(t_start + n_t + extra) * ni]
        rows = n_t * ni
        out_r = out[t_start * ni:(t_start + n_t) * ni].reshape(rows * ho, cc.num_filters_out)
        for step in cc.steps:
            shift = step.input_time_shift * ni
            yield step, in_chunk[shift:shift + rows], out_r, rows, len(step.columns) // ho


def convolve_forward(cc, inp, params, out, kaldi=None):
    """Adds the convolution of ``inp`` with ``params`` to ``out`` (both
    C-contiguous 2-D float32 arrays; no bias). With ``kaldi`` (a
    :class:`pynnet3.numerics.kaldi_cpu.KaldiCpu`) each step's product is
    Kaldi's AddMatMat onto the output, bit for bit."""
    xp = array_module(inp)
    _check_shapes(cc, inp, params, out)
    inp = _reshape_input(cc, inp, "input")
    for step, part, out_r, rows, pcols in _step_blocks(cc, inp, out):
        temp = _gather(xp, cc, part, step).reshape(rows * cc.height_out, pcols)
        if kaldi is None:
            out_r += temp @ _params_part(xp, params, step, pcols).T
        else:
            kaldi.add_mat_mat(out_r, 1.0, temp, False,
                              params[:, step.params_start_col:step.params_start_col + pcols],
                              True, 1.0)


def convolve_backward_data(cc, params, out_deriv, in_deriv):
    """Adds the derivative w.r.t. the convolution's input to ``in_deriv``
    (C-contiguous, so that reshaping it gives a view)."""
    xp = array_module(in_deriv)
    _check_shapes(cc, in_deriv, params, out_deriv)
    in_deriv = _reshape_input(cc, in_deriv, "input derivative")
    for step, part, od_r, rows, pcols in _step_blocks(cc, in_deriv, out_deriv):
        ncols = len(step.columns)
        temp = (od_r @ _params_part(xp, params, step, pcols)).reshape(rows, ncols)
        if step.columns_are_contiguous:
            part[:, step.first_column:step.first_column + ncols] += temp
            continue
        # Kaldi's AddCols with each level of backward_columns, in blocks
        # of num_filters_in columns (one block per height).
        part3 = part.reshape(rows, cc.height_in, cc.num_filters_in)
        temp3 = temp.reshape(rows, len(step.height_map), cc.num_filters_in)
        for heights, positions in step.backward_heights:
            part3[:, xp.asarray(heights), :] += temp3[:, xp.asarray(positions), :]


def convolve_backward_params(cc, inp, out_deriv, alpha, params_deriv):
    """Adds ``alpha`` times the parameter derivative to ``params_deriv``."""
    xp = array_module(inp)
    _check_shapes(cc, inp, params_deriv, out_deriv)
    inp = _reshape_input(cc, inp, "input")
    for step, part, od_r, rows, pcols in _step_blocks(cc, inp, out_deriv):
        temp = _gather(xp, cc, part, step)
        grad = od_r.T @ temp.reshape(rows * cc.height_out, pcols)
        params_deriv[:, step.params_start_col:step.params_start_col + pcols] += alpha * grad
