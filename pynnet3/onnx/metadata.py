"""What an exported model records about itself (ONNX metadata_props).

Every value is a string. Keys without a prefix are nnet3-compute's option
names, with the values the computation was exported for; ``nnet3.*`` keys
describe the network; ``pynnet3.*`` keys the export itself:

``pynnet3.model-kind``
    ``chunk`` (nnet3-compute's chunked computation, :mod:`.chunked`),
    ``streaming`` (the looped computation, :mod:`.streaming`) or ``xvector``
    (nnet3-xvector-compute's computation, :mod:`.dynamic`); a model of one
    compiled request (:mod:`.computation`) has ``nnet3.request`` instead.
``nnet3.left-context``, ``nnet3.right-context``, ``nnet3.modulus``
    the network's context and shift-invariance modulus (nnet3-info's
    ``left-context`` / ``right-context`` / ``modulus``).
``nnet3.input-dim``, ``nnet3.ivector-dim``, ``nnet3.output-dim``
    node dimensions (``ivector-dim`` 0 without an ``ivector`` input).
``frames-per-chunk``, ``extra-left-context``, ``extra-right-context``,
``extra-left-context-initial``, ``extra-right-context-final``, ``frame-subsampling-factor``, ``online-ivector-period``
    the chunk options (as given to nnet3-to-onnx; ``frames-per-chunk`` is
    rounded at run time exactly as nnet3-compute rounds it).
``use-priors``
    ``true`` when the .mdl's log-priors are subtracted inside the model.
``pynnet3.chunk.regular``, ``pynnet3.chunk.initial``
    the chunk computations the model holds (``left=L right=R input-frames=N
    output-frames=K``; ``initial`` only where the first chunk needs its own).
``pynnet3.chunk.recurrent``
    ``true`` when the chunk computation runs a recurrence frame by frame.
``pynnet3.chunk.length-generic``, ``pynnet3.output-computable``, ``pynnet3.output-computable-if``
    a graph for chunks of any length (:mod:`.dynamic`): the first and last
    output frame computable from ``T`` input frames, and the intervals that
    must not be empty for any to be (expressions such as ``T-9``).
``pynnet3.streaming.*``
    a streaming model's geometry (:mod:`.streaming`): chunk frames, left
    and right context, the first and later calls' input frames, i-vector rows
    and output frames, and the names of its states.
``pynnet3.source``
    the file the network was read from.
"""

from ..errors import UsageError

__all__ = ["CHUNK_OPTIONS", "KIND_KEY", "int_value", "bool_value", "parse_shape"]

KIND_KEY = "pynnet3.model-kind"

# nnet3-compute's chunk options, with their defaults
CHUNK_OPTIONS = (
    ("frames-per-chunk", 50),
    ("extra-left-context", 0),
    ("extra-right-context", 0),
    ("extra-left-context-initial", -1),
    ("extra-right-context-final", -1),
    ("frame-subsampling-factor", 1),
)


def int_value(meta, key, source="the model"):
    value = meta.get(key)
    if value is None:
        raise UsageError("%s has no '%s' in its metadata (not exported by nnet3-to-onnx?)"
                         % (source, key))
    try:
        return int(value)
    except ValueError:
        raise UsageError("%s: metadata '%s' is '%s', expected an integer"
                         % (source, key, value)) from None


def bool_value(meta, key, default=False):
    value = meta.get(key)
    if value is None:
        return default
    return value == "true"


def parse_shape(text):
    """``left=L right=R input-frames=N output-frames=K`` -> dict of ints."""
    out = {}
    for part in text.split():
        key, _, value = part.partition("=")
        out[key] = int(value)
    return out
