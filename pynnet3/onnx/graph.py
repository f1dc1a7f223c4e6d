"""A small builder for ONNX graphs of the default domain.

Every value pynnet3's lowerings create is a float32 tensor of rank 3,
``[batch, rows, cols]``: ``rows`` is a matrix's row count (static, or the
frame count where a graph is length-generic), ``cols`` its column count, and
``batch`` counts independent copies of the whole computation (several chunks
of several utterances in one run). The helpers here build the few operator
patterns the lowerings need over that layout (row and column slices,
gathers of rows, constant rows, products with a parameter matrix) and keep
constants unique, so a weight matrix used by several commands is stored
once.

Only default-domain operators are used, at opset :data:`OPSET` (ONNX 1.12,
onnxruntime >= 1.12): no custom domain, no contrib operator.
"""

import hashlib
import itertools

import numpy as np

from ..errors import ComputationError

OPSET = 17
IR_VERSION = 8

__all__ = ["OPSET", "IR_VERSION", "GraphBuilder", "INT64_MAX"]

INT64_MAX = np.iinfo(np.int64).max


def _outer_inputs(graph):
    """Every value name the nodes of ``graph`` (and its subgraphs) read."""
    names = set()
    for node in graph.node:
        names.update(node.input)
        for a in node.attribute:
            if a.type == a.GRAPH:
                names.update(_outer_inputs(a.g))
    return names


def _onnx():
    import onnx
    return onnx


class GraphBuilder:
    """Accumulates nodes, initializers, inputs and outputs of one graph.

    Names given by the caller (graph inputs and outputs: nnet3 node names)
    are kept as they are; every other value gets a fresh name built from a
    hint. ``batch_source``: the graph input whose first dimension is the
    batch size (set by :meth:`add_input` on the first input)."""

    def __init__(self, name="pynnet3"):
        self.name = name
        self.nodes = []
        self.initializers = []
        self.inputs = []
        self.outputs = []
        self._used = set()
        self._counter = itertools.count()
        self._consts = {}
        self._by_identity = {}      # id(array) -> (array, transposed?, name)
        self._memo = {}
        self.batch_source = None

    def subgraph(self, name):
        """A builder for a branch of an If (or a Loop body) inside this
        graph: its own nodes, outputs and cached values, this graph's names
        and constants (subgraph nodes may read the outer graph's values)."""
        child = GraphBuilder(name)
        child.initializers = self.initializers
        child._consts = self._consts
        child._by_identity = self._by_identity
        child._used = self._used
        child._counter = self._counter
        child.batch_source = self.batch_source
        return child

    def subgraph_proto(self):
        """This (sub)builder's nodes and outputs as a GraphProto without
        initializers of its own (they live in the outer graph); nodes no
        output needs are left out."""
        onnx = _onnx()
        self.prune()
        return onnx.helper.make_graph(self.nodes, self.name, self.inputs, self.outputs)

    # -- names ---------------------------------------------------------------------------------
    def fresh(self, hint="v"):
        hint = hint or "v"
        while True:
            name = "%s_%d" % (hint, next(self._counter))
            if name not in self._used:
                self._used.add(name)
                return name

    def reserve(self, name):
        if name in self._used:
            raise ComputationError("ONNX export: the name '%s' is used twice" % name)
        self._used.add(name)
        return name

    # -- graph interface ------------------------------------------------------------------------
    def add_input(self, name, elem_type, shape):
        """A graph input; ``shape`` entries are ints or dimension names."""
        onnx = _onnx()
        self.reserve(name)
        self.inputs.append(onnx.helper.make_tensor_value_info(name, elem_type, shape))
        if self.batch_source is None and elem_type == onnx.TensorProto.FLOAT:
            self.batch_source = name
        return name

    def add_output(self, name, value, elem_type, shape):
        """Makes ``value`` available as graph output ``name`` (an Identity
        node when the value has another name; ``name`` None: a fresh one)."""
        onnx = _onnx()
        if name is None:
            name = self.fresh("output")
        elif value != name:
            self.reserve(name)
        if value != name:
            self.nodes.append(onnx.helper.make_node("Identity", [value], [name],
                                                    name=self.fresh("out")))
        self.outputs.append(onnx.helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def op(self, op_type, inputs, hint=None, num_outputs=1, **attrs):
        """Adds one node; returns its output name (a list when
        ``num_outputs`` > 1)."""
        onnx = _onnx()
        outputs = [self.fresh(hint or op_type.lower()) for _ in range(num_outputs)]
        self.nodes.append(onnx.helper.make_node(op_type, list(inputs), outputs,
                                                name=self.fresh("n"), **attrs))
        return outputs[0] if num_outputs == 1 else outputs

    def memo(self, key, build):
        """The value cached under ``key``, built once by ``build()``."""
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = build()
        return value

    # -- constants ------------------------------------------------------------------------------
    def const(self, array, hint="c", dtype=None):
        """An initializer holding ``array`` (float32 unless it is an integer
        array or ``dtype`` says otherwise); equal arrays share one."""
        onnx = _onnx()
        arr = np.asarray(array)
        if dtype is not None:
            arr = arr.astype(dtype)
        elif arr.dtype.kind in "iu" or arr.dtype == np.bool_:
            arr = arr.astype(np.int64)
        else:
            arr = arr.astype(np.float32)
        arr = np.ascontiguousarray(arr)
        key = (arr.dtype.str, arr.shape, hashlib.sha1(arr.tobytes()).digest())
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.fresh(hint)
            self.initializers.append(onnx.numpy_helper.from_array(arr, name))
        return name

    def ints(self, values):
        return self.const(np.asarray(values, dtype=np.int64).reshape(-1), "i")

    def scalar(self, value, dtype=np.float32):
        return self.const(np.asarray(value, dtype=dtype).reshape(()), "s")

    # -- the batch dimension ----------------------------------------------------------------------
    def batch_shape(self, rows, cols):
        """A shape tensor ``[batch, rows, cols]`` (rows/cols static)."""
        return self.memo(("batch_shape", rows, cols), lambda: self.op(
            "Concat", [self._batch_dim(), self.ints([rows, cols])], "shape", axis=0))

    def _batch_dim(self):
        def build():
            if self.batch_source is None:
                return self.ints([1])
            shape = self.op("Shape", [self.batch_source], "shape")
            return self.op("Slice", [shape, self.ints([0]), self.ints([1])], "batch")
        return self.memo("batch_dim", build)

    def filled(self, value, rows, cols):
        """A ``[batch, rows, cols]`` tensor filled with ``value``."""
        def build():
            row = self.const(np.full((1, 1, cols), value, np.float32), "fill")
            return self.op("Expand", [row, self.batch_shape(rows, 1)], "filled")
        return self.memo(("filled", float(value), np.float32(value).tobytes(), rows, cols), build)

    def rows_like(self, x, row):
        """``row`` (a [1, 1, cols] value) repeated for every row of ``x``: a
        ``[batch, rows(x), cols]`` tensor."""
        shape = self.op("Shape", [x], "shape")
        rows_shape = self.op("Concat", [self.op("Slice", [shape, self.ints([0]),
                                                          self.ints([2])]),
                                        self.ints([1])], "shape", axis=0)
        return self.op("Expand", [row, rows_shape], "rows")

    # -- slices, concatenations, gathers ------------------------------------------------------------
    def slice(self, x, axis, start, end, step=1):
        """x[..., start:end:step, ...] along ``axis`` (static bounds; an
        ``end`` of None means to the end)."""
        end = INT64_MAX if end is None else end
        key = ("slice", x, axis, start, end, step)
        return self.memo(key, lambda: self.op(
            "Slice", [x, self.ints([start]), self.ints([end]), self.ints([axis]),
                      self.ints([step])], "slice"))

    def concat(self, values, axis):
        if len(values) == 1:
            return values[0]
        key = ("concat", tuple(values), axis)
        return self.memo(key, lambda: self.op("Concat", list(values), "concat", axis=axis))

    def gather_rows(self, x, rows):
        """x[:, rows, :] for a static index list (contiguous and strided
        lists become slices)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if rows.size == 0:
            raise ComputationError("internal error: gathering no rows")
        if rows.size == 1:
            return self.slice(x, 1, int(rows[0]), int(rows[0]) + 1)
        step = int(rows[1] - rows[0])
        if step > 0 and np.array_equal(rows, rows[0] + step * np.arange(rows.size)):
            return self.slice(x, 1, int(rows[0]), int(rows[-1]) + 1, step)
        return self.op("Gather", [x, self.const(rows, "rows")], "gather", axis=1)

    def pad_rows(self, x, before, after):
        """Zero rows added before and after x's rows."""
        if before == 0 and after == 0:
            return x
        return self.op("Pad", [x, self.ints([0, before, 0, 0, after, 0])], "pad",
                       mode="constant")

    def scale(self, x, alpha):
        alpha = np.float32(alpha)
        if alpha == 1.0:
            return x
        return self.op("Mul", [x, self.scalar(alpha)], "scaled")

    def add(self, a, b):
        return self.op("Add", [a, b], "sum")

    def transposed_const(self, weight, hint="w"):
        """The initializer holding ``weight``'s transpose; a parameter matrix
        used by many commands (a recurrent layer's, once per frame) is
        transposed and stored once."""
        key = id(weight)
        entry = self._by_identity.get(key)
        if entry is not None and entry[0] is weight:
            return entry[1]
        name = self.const(np.ascontiguousarray(np.asarray(weight, np.float32).T), hint)
        self._by_identity[key] = (weight, name)    # holding weight keeps its id unique
        return name

    def matmul_t(self, x, weight, hint="w"):
        """x times the transpose of ``weight`` (a float32 out x in matrix,
        stored transposed so onnxruntime can prepack it)."""
        return self.op("MatMul", [x, self.transposed_const(weight, hint)], "matmul")

    def affine(self, x, weight, bias, rows=None):
        """x W^T + b. With ``rows`` (x's static row count) as one 2-D Gemm
        over every row of every batch entry, which onnxruntime runs with the
        bias added inside the product (and fuses with a following Relu)."""
        bias = np.asarray(bias, np.float32)
        if rows is None or rows <= 0:
            y = self.matmul_t(x, weight)
            return y if bias.size == 0 else self.add(y, self.const(bias, "bias"))
        cols_in = weight.shape[1]
        flat = self.reshape(x, [-1, cols_in])
        inputs = [flat, self.transposed_const(weight)]
        if bias.size:
            inputs.append(self.const(bias, "bias"))
        y = self.op("Gemm", inputs, "gemm")
        return self.reshape(y, [-1, rows, weight.shape[0]])

    def reshape(self, x, shape):
        """Reshape with a static shape (0 copies the input's dimension)."""
        return self.op("Reshape", [x, self.ints(shape)], "reshape")

    def prune(self):
        """Drops the nodes no output of this (sub)graph depends on."""
        needed = {o.name for o in self.outputs}
        kept = []
        for node in reversed(self.nodes):
            if any(o in needed for o in node.output):
                kept.append(node)
                needed.update(node.input)
                for a in node.attribute:
                    if a.type == a.GRAPH:       # values a subgraph reads from outside
                        needed.update(_outer_inputs(a.g))
        self.nodes = kept[::-1]

    # -- the model ---------------------------------------------------------------------------------
    def graph(self, name=None):
        onnx = _onnx()
        return onnx.helper.make_graph(self.nodes, name or self.name, self.inputs,
                                      self.outputs, self.initializers)

    def model(self, metadata=None, doc=""):
        """The ModelProto (opset :data:`OPSET`), with ``metadata`` (str ->
        str) as its metadata_props; nodes and initializers nothing uses are
        left out."""
        onnx = _onnx()
        self.prune()
        used = _outer_inputs(self.graph())
        self.initializers[:] = [i for i in self.initializers if i.name in used]
        model = onnx.helper.make_model(
            self.graph(), producer_name="pynnet3", doc_string=doc,
            opset_imports=[onnx.helper.make_opsetid("", OPSET)])
        model.ir_version = IR_VERSION
        for key, value in (metadata or {}).items():
            entry = model.metadata_props.add()
            entry.key = key
            entry.value = value
        return model
