"""Commands run together: the fusions an ExecutionPlan makes for the default
(NumPy) arithmetic.

:func:`find_fusions` looks for these patterns in a computation's command
list (the commands as Kaldi's optimizer leaves them in TDNN and TDNN-F
networks) and returns what to run instead:

- *bias, ReLU, batch norm*: a kPropagate of a component with a bias
  (affine, fixed-affine, TDNN with bias) into submatrix S, then a ReLU in
  place on S, optionally then a test-mode batch norm in place on S. Run as
  the product alone (``propagate_deferring_bias``), then one pass
  ``S = max(S + bias, 0) * scale + offset``
  (:func:`~pynnet3.compute.fused_elementwise.bias_relu_scale_offset`); a ReLU
  then batch norm without the product before them fuse the same way;
- *scaled sum* (a Descriptor ``Sum(Scale(a, x), y)``): a kMatrixCopy
  ``D = a * X`` (X is D itself or another matrix) or a kCopyRows ``D = a *
  X[rows]`` (no -1 row, X another matrix), then, after nothing but
  deallocations of other matrices, a kMatrixAdd ``D += b * Y`` (Y another
  matrix): one pass ``D = a * X[rows] + b * Y``
  (:func:`~pynnet3.compute.fused_elementwise.scaled_copy_add`), run at the copy;
- *zeroing before an adding product*: a kSetConst(0) of a whole matrix M
  whose next use is a kPropagate of a component that adds its output
  (kPropagateAdds; TDNN without bias, linear) into all of M, from another
  matrix: the zeroing is dropped and the component overwrites M
  (``propagate_overwriting``).

- *statistics pooled from their input* (x-vector style): a
  StatisticsExtractionComponent's kPropagate into a matrix E whose every
  output row sums one input row, the input rows of each pooling window
  consecutive, and E read by nothing but a StatisticsPoolingComponent's
  kPropagate: the pooled sums (and sums of squares) are added straight
  from the extraction's input when the extraction runs, and the pooling
  finishes from them; E is never written or read. The sums are added in
  the same order from the same values (each row of E is 0 + x, which only
  turns a -0 into +0, and no sum that starts at +0 can tell), so the bits
  are the unfused run's;
- *spliced products*: the kPropagate of a shifted splice
  (:mod:`pynnet3.compute.shifted_splice`, found by the plan) runs from the
  shifted rows, its copies are skipped; with a bias, ReLU and batch norm
  after it, it is the product of the first pattern;
- *hoisted products*: the kPropagate of a recurrent step whose input's x
  part is multiplied ahead (:mod:`pynnet3.compute.hoisted_products`, found
  by the plan) runs from its block's rows in the plan's scratch plus the
  product of its other columns.

None of these commands stores statistics or keeps a memo (they would need
the intermediate values). Guarantee: the fused run computes exactly the
numbers of the unfused run of the same commands on the default
arithmetic, bit for bit (the kernels round as the NumPy passes they
replace), except that a spliced product adds its blocks' products one
after the other and a hoisted product its two parts (within float32
rounding; see shifted_splice.py and hoisted_products.py); nothing
else reads the intermediate values, since each pattern only spans
commands that overwrite them in place. The Kaldi-exact arithmetic never
fuses (its roundings are Kaldi's, command by command).
"""

import numpy as np

from ..compiler.computation import CommandType, touched_matrices
from ..components.base import ComponentProperty
from ..components.row_ranges import add_row_ranges
from .fused_elementwise import bias_relu_scale_offset, scaled_copy_add
from .hoisted_products import run_hoisted_step
from .shifted_splice import shifted_products

__all__ = ["Fusions", "find_fusions"]

T = CommandType


class Fusions:
    """``ops``: command index -> function(computer) that runs the fused
    commands starting there; ``skip``: command indexes whose work an op has
    done (they run as no-ops)."""

    __slots__ = ("ops", "skip")

    def __init__(self):
        self.ops = {}
        self.skip = set()

    def __len__(self):
        return len(self.ops)


def _plain_propagate(c):
    """A kPropagate that stores no stats and keeps no memo."""
    return c.command_type == T.kPropagate and c.arg5 == 0 and c.arg6 == 0


def _in_place(c):
    return c.arg3 == c.arg4 and c.arg3 > 0


def _is_relu(component):
    return component.type_name == "RectifiedLinearComponent"


def _test_mode_batchnorm(component):
    return (component.type_name == "BatchNormComponent" and component.test_mode
            and component.block_dim == component.dim and component.scale_vec is not None)


def _has_bias(component):
    bias = getattr(component, "bias_params", None)
    return (hasattr(component, "propagate_deferring_bias") and bias is not None
            and bias.shape[0] != 0)


def find_fusions(computation, nnet, plan, splices=None, hoisted=None):
    """The :class:`Fusions` of a computation (see the module docstring);
    ``plan`` is its ExecutionPlan (row tables, zeroing it already skips);
    ``splices``: its shifted splices ({propagate command index:
    :class:`~pynnet3.compute.shifted_splice.ShiftedSplice`}), whose copies
    are skipped and whose products run from the shifted rows;
    ``hoisted``: its hoisted products ({propagate command index:
    :class:`~pynnet3.compute.hoisted_products.HoistedStep`}), run with
    their input half multiplied ahead into the plan's scratch."""
    fusions = Fusions()
    commands = computation.commands
    components = nnet.components
    splices = splices or {}
    hoisted = hoisted or {}
    for i, step in hoisted.items():
        fusions.ops[i] = _hoisted_run(commands[i], components[commands[i].arg1], step)
    for splice in splices.values():
        fusions.skip.update(splice.copies)
    num = len(commands)
    i = 0
    while i < num:
        c = commands[i]
        if i in hoisted:
            i += 1
            continue
        if _plain_propagate(c) and 0 <= c.arg1 < len(components):
            length = _bias_relu_batchnorm(fusions, commands, components, i, splices.get(i))
            if length:
                i += length
                continue
            if i in splices:
                fusions.ops[i] = _spliced_run(c, components[c.arg1], splices[i])
                i += 1
                continue
            if components[c.arg1].type_name == "StatisticsExtractionComponent":
                _pooled_statistics(fusions, computation, components, i)
        if c.command_type in (T.kMatrixCopy, T.kCopyRows):
            _scaled_sum(fusions, computation, plan, i)
        i += 1
    _overwriting_propagates(fusions, computation, nnet, plan)
    return fusions


def _product_deferring_bias(computer, product, component, splice):
    """Runs the kPropagate ``product`` without its bias; returns the bias."""
    if splice is not None:
        out = computer._sub(product.arg4)
        shifted_products(np.asarray(component.linear_params),
                         computer.matrices[splice.matrix][:, :splice.width], splice, out)
        return np.asarray(component.bias_params)
    indexes = computer.computation.component_precomputed_indexes[product.arg2].data
    return component.propagate_deferring_bias(indexes, computer._sub(product.arg3),
                                              computer._sub(product.arg4))


def _spliced_run(c, component, splice):
    """A shifted splice's kPropagate alone: the product, then the bias."""
    def run(computer):
        bias = _product_deferring_bias(computer, c, component, splice)
        if bias.shape[0] != 0:
            computer._sub(c.arg4)[...] += bias
    return run


def _hoisted_run(c, component, step):
    """A hoisted step's kPropagate (see hoisted_products.py)."""
    scratch = step.block.scratch

    def run(computer):
        run_hoisted_step(computer, step, c, component, computer.plan.scratch(scratch))
    return run


def _bias_relu_batchnorm(fusions, commands, components, i, splice=None):
    """Fuses the pattern starting at command ``i`` (``splice``: its product
    is a shifted splice's); returns how many commands it spans (0: no
    fusion)."""
    first = commands[i]
    component = components[first.arg1]
    s = first.arg4
    product = None
    j = i
    if _has_bias(component) and first.arg4 != first.arg3 and first.arg4 > 0:
        product = first
        j += 1
    relu = commands[j] if j < len(commands) else None
    if (relu is None or not _plain_propagate(relu) or not _in_place(relu)
            or relu.arg3 != s or not (0 <= relu.arg1 < len(components))
            or not _is_relu(components[relu.arg1])):
        return 0
    bn = commands[j + 1] if j + 1 < len(commands) else None
    batchnorm = None
    if (bn is not None and _plain_propagate(bn) and _in_place(bn) and bn.arg3 == s
            and 0 <= bn.arg1 < len(components) and _test_mode_batchnorm(components[bn.arg1])):
        batchnorm = components[bn.arg1]
    if product is None and batchnorm is None:
        return 0                # a lone ReLU: nothing to fuse
    last = j + 1 if batchnorm is not None else j

    def run(computer, product=product, component=component, batchnorm=batchnorm):
        out = computer._sub(s)
        bias = None
        if product is not None:
            bias = _product_deferring_bias(computer, product, component, splice)
        if batchnorm is not None:
            bias_relu_scale_offset(out, bias, batchnorm.scale_vec, batchnorm.offset)
        else:
            bias_relu_scale_offset(out, bias)

    fusions.ops[i] = run
    fusions.skip.update(range(i + 1, last + 1))
    return last + 1 - i


def _scaled_sum(fusions, computation, plan, i):
    commands = computation.commands
    subs = computation.submatrices
    c = commands[i]
    if i in fusions.skip or i in plan.add_as_copy:
        return
    d = c.arg1
    dest_matrix = subs[d].matrix_index
    rows = None
    if c.command_type == T.kMatrixCopy:
        if c.arg2 != d and subs[c.arg2].matrix_index == dest_matrix:
            return              # overlapping parts of one matrix
    else:
        if c.alpha == 0.0 or subs[c.arg2].matrix_index == dest_matrix:
            return
        table = plan.rows(c.arg3)
        if not table.all_valid or table.num_rows != subs[d].num_rows:
            return
        if table.identity_offset is None:
            rows = table.src_rows
    # The kMatrixAdd into D, after only deallocations of other matrices.
    j = i + 1
    while j < len(commands) and commands[j].command_type == T.kDeallocMatrix:
        if subs[commands[j].arg1].matrix_index == dest_matrix:
            return
        j += 1
    if j >= len(commands):
        return
    add = commands[j]
    if (add.command_type != T.kMatrixAdd or add.arg1 != d or j in plan.add_as_copy
            or subs[add.arg2].matrix_index == dest_matrix):
        return
    # Y must not be one of the matrices deallocated in between.
    add_matrix = subs[add.arg2].matrix_index
    if any(subs[commands[k].arg1].matrix_index == add_matrix for k in range(i + 1, j)):
        return
    src, alpha, beta = c.arg2, c.alpha, add.alpha
    identity = None if rows is not None or c.command_type == T.kMatrixCopy \
        else plan.rows(c.arg3).identity_offset
    num_rows = subs[d].num_rows

    def run(computer):
        dest = computer._sub(d)
        source = dest if src == d else computer._sub(src)
        if identity is not None:
            source = source[identity:identity + num_rows]
        scaled_copy_add(dest, source, rows, alpha, computer._sub(add.arg2), beta)

    fusions.ops[i] = run
    fusions.skip.add(j)


def _overwriting_propagates(fusions, computation, nnet, plan):
    """Zeroing before a product that adds into the whole matrix."""
    commands = computation.commands
    subs = computation.submatrices
    components = nnet.components
    next_touch = {}
    for i in range(len(commands) - 1, -1, -1):
        c = commands[i]
        t = c.command_type
        if (t == T.kSetConst and c.alpha == 0.0 and i not in plan.skip_zeroing
                and 0 < c.arg1 < len(subs) and computation.is_whole_matrix(c.arg1)):
            m = subs[c.arg1].matrix_index
            j = next_touch.get(m)
            if j is not None and j not in fusions.skip and j not in fusions.ops:
                p = commands[j]
                if (_plain_propagate(p) and 0 <= p.arg1 < len(components)
                        and hasattr(components[p.arg1], "propagate_overwriting")
                        and components[p.arg1].properties() & ComponentProperty.kPropagateAdds
                        and subs[p.arg4].matrix_index == m
                        and computation.is_whole_matrix(p.arg4)
                        and (p.arg3 == 0 or subs[p.arg3].matrix_index != m)):
                    fusions.skip.add(i)
                    fusions.ops[j] = _overwriting_run(p, components[p.arg1])
        for m in touched_matrices(computation, c):
            next_touch[m] = i


def _overwriting_run(c, component):
    def run(computer):
        indexes = computer.computation.component_precomputed_indexes[c.arg2].data
        component.propagate_overwriting(indexes, computer._sub(c.arg3), computer._sub(c.arg4))
    return run


def _pooled_statistics(fusions, computation, components, i):
    """Statistics pooled straight from the extraction's input (see the
    module docstring), if the extraction at command ``i`` allows it."""
    commands = computation.commands
    subs = computation.submatrices
    extract = commands[i]
    if not (0 < extract.arg3 < len(subs) and 0 < extract.arg4 < len(subs)
            and computation.is_whole_matrix(extract.arg4)):
        return
    stats_matrix = subs[extract.arg4].matrix_index
    pool, j = None, None
    zeroings = []               # of E before the extraction (which writes it all)
    for k, c in enumerate(commands):
        if k == i or stats_matrix not in touched_matrices(computation, c):
            continue
        if c.command_type in (T.kAllocMatrix, T.kDeallocMatrix):
            continue
        if c.command_type == T.kSetConst and k < i:
            zeroings.append(k)
            continue
        if (k > i and pool is None and _plain_propagate(c) and c.arg3 == extract.arg4
                and 0 <= c.arg1 < len(components)
                and components[c.arg1].type_name == "StatisticsPoolingComponent"
                and subs[c.arg4].matrix_index != stats_matrix):
            pool, j = c, k
            continue
        return                  # E is read or written by something else
    if pool is None:
        return
    extraction, pooling = components[extract.arg1], components[pool.arg1]
    ext_ranges = computation.component_precomputed_indexes[extract.arg2].data.forward_indexes
    ext_counts = computation.component_precomputed_indexes[extract.arg2].data.counts
    pool_ranges = computation.component_precomputed_indexes[pool.arg2].data.forward_indexes
    if ext_ranges.shape[0] == 0 or not (ext_ranges[:, 1] - ext_ranges[:, 0] == 1).all():
        return                  # an extraction row sums several input rows (or none)
    # each pooling window's extraction rows must be consecutive input rows
    input_ranges = np.zeros_like(pool_ranges)
    for p, (begin, end) in enumerate(pool_ranges):
        if end <= begin:
            continue
        first = ext_ranges[begin, 0]
        if not np.array_equal(ext_ranges[begin:end, 0], np.arange(first, first + end - begin)):
            return
        input_ranges[p] = (first, first + end - begin)
    # the pooled counts are the computation's constants: added up now, as
    # the pooling would add E's count column
    counts = np.zeros((pool_ranges.shape[0], 1), np.float32)
    add_row_ranges(ext_counts.reshape(-1, 1).astype(np.float32), pool_ranges, counts)
    f = extraction.input_dim_
    width = pooling.input_dim_ - 1          # f sums (and f sums of squares)
    # the sums go from the extraction to the pooling through the computer
    # (the threads' plans share these functions)

    def run_extraction(computer):
        rows = computer._sub(extract.arg3)
        sums = np.empty((input_ranges.shape[0], width), np.float32)
        add_row_ranges(rows, input_ranges, sums[:, :f], onto_zeros=True)
        if width > f:
            add_row_ranges(rows, input_ranges, sums[:, f:], squared=True, onto_zeros=True)
        computer.fused_values[i] = sums

    def run_pooling(computer):
        sums = computer.fused_values.pop(i)
        pooling.propagate_from_sums(counts, sums, computer._sub(pool.arg4))

    fusions.ops[i] = run_extraction
    fusions.ops[j] = run_pooling
    fusions.skip.update(zeroings)
