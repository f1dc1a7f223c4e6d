"""ComputationRequest and IoSpecification (Kaldi's nnet-computation.h).

A request names, for each input node, the Indexes the user will supply and,
for each output node, the Indexes wanted; ``has_deriv`` says whether an input
derivative is wanted / an output derivative will be supplied. The compiler
turns a request plus an Nnet into an NnetComputation.

Reading and writing follow Kaldi's ComputationRequest::Read/Write exactly (text
and binary); ``misc_info`` (Kaldi's empty MiscComputationInfo) is not
serialized, as in Kaldi.
"""

import struct
from dataclasses import dataclass, field

from ..errors import ComputationError
from ..io.files import open_input, write_object
from ..io.stream import InputStream, OutputStream
from ..common.index import Index
from ..common.index_io import print_indexes, read_index_vector, write_index_vector

_UINT64 = struct.Struct("<Q")


def _write_size_t(stream, value):
    """Kaldi's WriteBasicType<size_t>: unsigned, so the size byte is -8."""
    if stream.binary:
        stream.write_raw(b"\xf8" + _UINT64.pack(value))
    else:
        stream.write_raw(b"%d " % value)


def _read_size_t(stream, what):
    if stream.binary:
        start = stream.pos
        data = stream.data
        if start + 9 > len(data):
            raise stream.error("expected %s (size_t), got end of file" % what)
        if data[start] != 0xF8:
            raise stream.error("expected %s (size_t, size byte -8), got size byte %d"
                               % (what, data[start] - 256 if data[start] > 127 else data[start]))
        stream.pos = start + 9
        return _UINT64.unpack_from(data, start + 1)[0]
    start = stream.pos
    value = stream.read_int64()
    if value < 0:
        raise stream.error("expected a non-negative %s, got %d" % (what, value), start)
    return value


@dataclass(slots=True)
class IoSpecification:
    """One input or output of a request: node name, Indexes, derivative flag."""

    name: str
    indexes: list = field(default_factory=list)    # list of Index (n, t, x)
    has_deriv: bool = False

    @classmethod
    def from_t_range(cls, name, t_start, t_end, has_deriv=False):
        """Indexes (0, t, 0) for t in [t_start, t_end), like Kaldi's constructor."""
        return cls(name, [Index(0, t, 0) for t in range(t_start, t_end)], has_deriv)

    def read_from(self, stream):
        stream.expect_token("<IoSpecification>")
        self.name = stream.read_token()
        stream.expect_token("<NumIndexes>")
        num = _read_size_t(stream, "number of indexes")
        stream.expect_token("<Indexes>")
        start = stream.pos
        self.indexes = read_index_vector(stream)
        if len(self.indexes) != num:
            raise stream.error("IoSpecification '%s': <NumIndexes> %d but %d indexes"
                               % (self.name, num, len(self.indexes)), start)
        stream.expect_token("<HasDeriv>")
        self.has_deriv = stream.read_bool()
        stream.expect_token("</IoSpecification>")
        return self

    def write_to(self, stream):
        stream.write_token("<IoSpecification>")
        if not stream.binary:
            stream.write_raw(b"\n")
        stream.write_token(self.name)
        stream.write_token("<NumIndexes>")
        _write_size_t(stream, len(self.indexes))
        stream.write_token("<Indexes>")
        write_index_vector(stream, self.indexes)
        stream.write_token("<HasDeriv>")
        stream.write_bool(self.has_deriv)
        if not stream.binary:
            stream.write_raw(b"\n")
        stream.write_token("</IoSpecification>")
        if not stream.binary:
            stream.write_raw(b"\n")


def _write_specs(stream, name, specs):
    """Kaldi's ``<NumX> n <X> spec...`` of a ComputationRequest (``name``:
    Inputs or Outputs), each part followed by a newline in text mode."""
    text = not stream.binary
    stream.write_token("<Num%s>" % name)
    _write_size_t(stream, len(specs))
    if text:
        stream.write_raw(b"\n")
    stream.write_token("<%s>" % name)
    for spec in specs:
        spec.write_to(stream)
    if text:
        stream.write_raw(b"\n")


@dataclass(slots=True)
class ComputationRequest:
    """Kaldi's ComputationRequest: what a computation is asked to do. For
    each input node, the Indexes ``(n, t, x)`` the user will supply (one row
    each, in order); for each output node, the Indexes wanted; whether
    derivatives are wanted. :func:`pynnet3.compile` turns a request and a
    network into an NnetComputation. Read and written in Kaldi's
    serialization (text or binary).

    Args:
        inputs: a list of IoSpecification (``pynnet3.compiler.request.IoSpecification``:
            a node name, a list of Indexes, ``has_deriv``);
            ``IoSpecification.from_t_range(name, begin, end)`` gives t =
            begin .. end - 1.
        outputs: a list of IoSpecification.
        need_model_derivative: the backward pass computes the parameter
            gradient.
        store_component_stats: the forward pass accumulates the components'
            statistics.
        misc_info: Kaldi's (empty) MiscComputationInfo.

    Raises:
        PynnetError: :meth:`read` raises KaldiFormatError on a bad file.

    Example::

        import pynnet3
        from pynnet3.compiler.request import IoSpecification

        request = pynnet3.ComputationRequest(
            inputs=[IoSpecification.from_t_range("input", -8, 18),
                    IoSpecification.from_t_range("ivector", 0, 1)],
            outputs=[IoSpecification.from_t_range("output", 0, 10)])
        request.write("request.txt")                      # Kaldi's text form
        print(pynnet3.ComputationRequest.read("request.txt") == request)

    Output::

        True
    """

    inputs: list = field(default_factory=list)     # IoSpecification
    outputs: list = field(default_factory=list)    # IoSpecification
    need_model_derivative: bool = False
    store_component_stats: bool = False
    misc_info: object = None    # Kaldi's MiscComputationInfo (empty); passed to components

    def index_for_input(self, node_name):
        """Position of the input named ``node_name`` or -1 (error if listed twice)."""
        return _index_for(self.inputs, node_name, "input")

    def index_for_output(self, node_name):
        return _index_for(self.outputs, node_name, "output")

    def need_derivatives(self):
        """Kaldi's NeedDerivatives(): model or input derivatives wanted; then an
        output derivative must be supplied."""
        ans = self.need_model_derivative or any(s.has_deriv for s in self.inputs)
        if ans and not any(s.has_deriv for s in self.outputs):
            raise ComputationError("You requested model derivatives or input derivatives, "
                                   "but provide no derivatives at the output.")
        return ans

    # -- serialization ------------------------------------------------------------
    @classmethod
    def read(cls, rxfilename):
        """Reads a request in Kaldi's serialization.

        Args:
            rxfilename: a file (text or binary), ``-`` or ``command |``.

        Returns:
            A new ComputationRequest.

        Raises:
            KaldiFormatError: not a request (names the file and offset).
        """
        return cls().read_from(open_input(rxfilename))

    @classmethod
    def from_bytes(cls, data, source="<memory>"):
        return cls().read_from(InputStream.from_bytes(data, source))

    def read_from(self, stream):
        stream.expect_token("<ComputationRequest>")
        stream.expect_token("<NumInputs>")
        num_inputs = _read_size_t(stream, "number of inputs")
        stream.expect_token("<Inputs>")
        self.inputs = [IoSpecification("").read_from(stream) for _ in range(num_inputs)]
        stream.expect_token("<NumOutputs>")
        num_outputs = _read_size_t(stream, "number of outputs")
        stream.expect_token("<Outputs>")
        self.outputs = [IoSpecification("").read_from(stream) for _ in range(num_outputs)]
        stream.expect_token("<NeedModelDerivative>")
        self.need_model_derivative = stream.read_bool()
        stream.expect_token("<StoreComponentStats>")
        self.store_component_stats = stream.read_bool()
        stream.expect_token("</ComputationRequest>")
        return self

    def write_to(self, stream):
        stream.write_token("<ComputationRequest>")
        if not stream.binary:
            stream.write_raw(b"\n")
        _write_specs(stream, "Inputs", self.inputs)
        _write_specs(stream, "Outputs", self.outputs)
        stream.write_token("<NeedModelDerivative>")
        stream.write_bool(self.need_model_derivative)
        stream.write_token("<StoreComponentStats>")
        stream.write_bool(self.store_component_stats)
        stream.write_token("</ComputationRequest>")
        if not stream.binary:
            stream.write_raw(b"\n")

    def to_bytes(self, binary=False):
        stream = OutputStream(binary)
        stream.write_header()
        self.write_to(stream)
        return stream.getvalue()

    def write(self, wxfilename, binary=False):
        """Writes the request in Kaldi's serialization (ComputationRequest::Write).

        Args:
            wxfilename: a file, ``-`` or ``| command``.
            binary: binary (True) or text form (the default).

        Returns:
            None.
        """
        write_object(wxfilename, binary, self.write_to)

    def print_request(self):
        """Kaldi's ComputationRequest::Print (used in error messages)."""
        lines = [" # Computation request:\n"]
        for i, spec in enumerate(self.inputs):
            lines.append("input-%d: name=%s, has-deriv=%s, indexes=%s\n"
                         % (i, spec.name, "true" if spec.has_deriv else "false",
                            print_indexes(spec.indexes)))
        for i, spec in enumerate(self.outputs):
            lines.append("output-%d: name=%s, has-deriv=%s, indexes=%s\n"
                         % (i, spec.name, "true" if spec.has_deriv else "false",
                            print_indexes(spec.indexes)))
        lines.append("need-model-derivative: %s\n"
                     % ("true" if self.need_model_derivative else "false"))
        lines.append("store-component-stats: %s\n"
                     % ("true" if self.store_component_stats else "false"))
        return "".join(lines)


def _index_for(specs, node_name, what):
    ans = -1
    for i, spec in enumerate(specs):
        if spec.name == node_name:
            if ans != -1:
                raise ComputationError("request lists %s '%s' twice" % (what, node_name))
            ans = i
    return ans
