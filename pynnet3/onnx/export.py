"""Exporting a Kaldi network: the Python API behind nnet3-to-onnx.

    >>> from pynnet3.onnx import export
    >>> model = export("final.raw", "final.onnx", frames_per_chunk=150,
    ...                frame_subsampling_factor=3)

The network (a ``.raw``, or a ``.mdl``'s network; with ``use_priors`` a
``.mdl`` whose log-priors are subtracted inside the model) is prepared as
nnet3-compute prepares it (batch-norm and dropout in test mode, Kaldi's
CollapseModel), then exported as one of:

- ``kind="chunk"`` (default): nnet3-compute's chunked computation for the
  given chunk options (:mod:`.chunked`);
- ``kind="streaming"``: the looped computation Kaldi's
  DecodableNnetSimpleLooped runs, one chunk per call with explicit state
  (:mod:`.streaming`);
- ``kind="xvector"``: nnet3-xvector-compute's computation, for any number
  of frames (:mod:`.dynamic`).

The options, the network's context and modulus are recorded in the model's
metadata (:mod:`.metadata`). Every model passes
``onnx.checker.check_model(model, full_check=True)`` before it is returned.
"""

import logging
import os
import tempfile

from ..compiler.computation import CommandType
from ..model.context import compute_simple_nnet_context
from ..compute.utterance import (ChunkLayout, SimpleComputationOptions,
                                 prepare_nnet_for_compute)
from ..errors import NnetError, PynnetError, UsageError
from ..nnet.nnet import is_simple_nnet
from .chunked import NeedsLengthGenericModel, chunk_request, chunk_shapes, chunked_graph
from .components import NotLowerable
from .metadata import CHUNK_OPTIONS, KIND_KEY
from ..model.am import log_priors as log_priors_of, read_mdl
from ..nnet.nnet import Nnet
from ..compute.compilation import make_compiler
from .dynamic import LengthGenericLowering
from .graph import GraphBuilder
from ..compute.decodable_simple_looped import DecodableNnetSimpleLoopedInfo
from ..driver.compile_looped import NnetSimpleLoopedComputationOptions
from .streaming import streaming_graph

logger = logging.getLogger("pynnet3")

# Above this many commands in its fixed-size chunk computations (a recurrent
# network unrolled over long chunks: onnxruntime needs tens of seconds to
# load such a graph) a network is exported as a length-generic graph when it
# can be.
MAX_UNROLLED_COMMANDS = 30000

__all__ = ["export", "read_network", "save_model", "chunk_model", "streaming_model",
           "xvector_model", "network_metadata"]


def read_network(model, use_priors=False):
    """(nnet, priors) from a file name (``.raw``, or ``.mdl``: its network;
    with ``use_priors`` a ``.mdl`` is required and its priors returned) or
    from an Nnet / AmNnetSimple object (copied)."""
    if isinstance(model, (str, os.PathLike)):
        if use_priors:
            _, am_nnet = read_mdl(str(model))
            return am_nnet.nnet, am_nnet.priors
        return Nnet.read(str(model)), None
    if hasattr(model, "priors") and hasattr(model, "nnet"):
        return model.nnet.copy(), (model.priors if use_priors else None)
    if use_priors:
        raise UsageError("use_priors needs a .mdl (or an AmNnetSimple), not a raw network")
    return model.copy(), None


def save_model(model, path):
    """Writes ``model`` to ``path`` through a temporary file in the same
    folder, so a failed write leaves no half-written model."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".onnx-", dir=folder)
    except OSError as e:
        raise PynnetError("cannot open %s for writing: %s" % (path, e.strerror)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise PynnetError("cannot write %s: %s" % (path, e.strerror)) from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def network_metadata(nnet, left, right):
    """The ``nnet3.*`` metadata of a (prepared) network."""
    return {
        "nnet3.left-context": str(left),
        "nnet3.right-context": str(right),
        "nnet3.modulus": str(nnet.modulus()),
        "nnet3.input-dim": str(nnet.input_dim("input")),
        "nnet3.ivector-dim": str(max(0, nnet.input_dim("ivector"))),
        "nnet3.output-dim": str(nnet.output_dim("output")),
    }


def _check(model):
    import onnx
    onnx.checker.check_model(model, full_check=True)
    return model


def _compiler(nnet, optimize_options):
    return make_compiler(nnet, optimize_options)


def chunk_model(nnet, opts=None, priors=None, optimize_options=None, online_ivector_period=0,
                source="", any_length=False):
    """nnet3-compute's chunked computation of a *prepared* network
    (:func:`pynnet3.compute.utterance.prepare_nnet_for_compute`) as an ONNX
    ModelProto (see :mod:`.chunked`). ``opts``: SimpleComputationOptions
    (its acoustic scale is left to the runtime). ``priors``: subtracted in
    the log domain. ``any_length``: a length-generic graph (:mod:`.dynamic`)
    even where fixed-size padded chunks would be exact."""
    opts = opts if opts is not None else SimpleComputationOptions()
    if not is_simple_nnet(nnet):
        raise NnetError("nnet3-to-onnx needs a 'simple' network (an input node 'input', an "
                        "output node 'output', optionally an input node 'ivector'), as "
                        "nnet3-compute does")
    left, right = compute_simple_nnet_context(nnet)
    layout = ChunkLayout(opts, left, right, nnet.modulus())
    has_ivector = nnet.input_dim("ivector") > 0
    log_priors = log_priors_of(priors, nnet.output_dim("output"))
    meta = {}
    try:
        if any_length:
            raise NeedsLengthGenericModel("a graph for chunks of any length was asked for")
        shapes = chunk_shapes(nnet, layout, has_ivector)
        compiler = _compiler(nnet, optimize_options)
        computations = [compiler.compile(chunk_request(s, has_ivector)) for s in shapes]
        size = sum(len(c.commands) for c in computations)
        if size > MAX_UNROLLED_COMMANDS:
            # An unrolled graph this size takes onnxruntime long to load; a
            # recurrence as a Scan is small (and as exact), where possible.
            try:
                LengthGenericLowering(nnet, opts.frame_subsampling_factor)
            except NotLowerable:
                pass
            else:
                raise NeedsLengthGenericModel(
                    "the fixed-size chunk computations have %d commands (more than %d)"
                    % (size, MAX_UNROLLED_COMMANDS))
    except NeedsLengthGenericModel as e:
        # Kaldi's chunks depend on their own length: one graph for any length
        logger.info("Exporting a chunk computation for chunks of any length: %s", e)
        lowering = LengthGenericLowering(nnet, opts.frame_subsampling_factor)
        g = lowering.lower(GraphBuilder("nnet3_chunk_any_length"), None, log_priors)
        lo, hi, conditions = lowering.output_computable()
        meta["pynnet3.chunk.length-generic"] = "true"
        meta["pynnet3.output-computable"] = "%s %s" % (lo, hi)
        meta["pynnet3.output-computable-if"] = ";".join("%s %s" % c for c in conditions)
        shapes = []
    else:
        g = chunked_graph(nnet, shapes, computations, has_ivector, log_priors)
        # a component propagated several times: a recurrence unrolled in time
        seen, unrolled = set(), False
        for c in computations[0].commands:
            if c.command_type == CommandType.kPropagate:
                unrolled |= c.arg1 in seen
                seen.add(c.arg1)
        meta["pynnet3.chunk.recurrent"] = "true" if unrolled else "false"
    meta.update({KIND_KEY: "chunk", "pynnet3.source": source,
                 "use-priors": "true" if log_priors is not None else "false",
                 "online-ivector-period": str(online_ivector_period)})
    meta.update(network_metadata(nnet, left, right))
    for name, _ in CHUNK_OPTIONS:
        meta[name] = str(getattr(opts, name.replace("-", "_")))
    for shape in shapes:
        meta["pynnet3.chunk." + shape.name] = shape.describe()
    return _check(g.model(meta, doc="nnet3-compute's chunk computation, exported by pynnet3"))


def streaming_model(nnet, frames_per_chunk=24, extra_left_context_initial=0,
                    frame_subsampling_factor=1, priors=None, optimize_options=None,
                    online_ivector_period=0, source=""):
    """The looped computation of a *prepared* network (Kaldi's
    DecodableNnetSimpleLooped with these options; ``nnet`` is changed in
    place to read one i-vector per chunk, as Kaldi changes it) as a
    streaming ONNX ModelProto (see :mod:`.streaming`)."""
    if not is_simple_nnet(nnet):
        raise NnetError("nnet3-to-onnx --streaming needs a 'simple' network (an input node "
                        "'input', an output node 'output', optionally an input node "
                        "'ivector')")
    left, right = compute_simple_nnet_context(nnet)
    opts = NnetSimpleLoopedComputationOptions(
        extra_left_context_initial=extra_left_context_initial,
        frame_subsampling_factor=frame_subsampling_factor, frames_per_chunk=frames_per_chunk,
        acoustic_scale=1.0)
    if optimize_options is not None:
        opts.optimize_config = optimize_options
    info = DecodableNnetSimpleLoopedInfo(opts, nnet, prepared=True)
    log_priors = log_priors_of(priors, nnet.output_dim("output"))
    ivector_rows = ((info.num_ivectors(0), info.num_ivectors(1), info.num_ivectors(2))
                    if info.has_ivectors else (0, 0, 0))
    begin1, end1 = info.chunk_input_range(0)
    begin2, end2 = info.chunk_input_range(1)
    g, layout = streaming_graph(nnet, info.computation, info.frames_per_chunk,
                                frame_subsampling_factor, log_priors,
                                (end1 - begin1) + (end2 - begin2), ivector_rows)
    meta = {KIND_KEY: "streaming", "pynnet3.source": source,
            "use-priors": "true" if log_priors is not None else "false",
            "online-ivector-period": str(online_ivector_period),
            "frames-per-chunk": str(frames_per_chunk),
            "extra-left-context-initial": str(extra_left_context_initial),
            "frame-subsampling-factor": str(frame_subsampling_factor),
            "pynnet3.streaming.chunk-frames": str(info.frames_per_chunk),
            "pynnet3.streaming.left-context": str(info.frames_left_context),
            "pynnet3.streaming.right-context": str(info.frames_right_context),
            "pynnet3.streaming.first-input-frames": str(layout.first_frames),
            "pynnet3.streaming.first-ivector-rows": str(layout.first_ivector_rows),
            "pynnet3.streaming.first-ivector-rows-chunk1": str(ivector_rows[0]),
            "pynnet3.streaming.chunk-ivector-rows": str(layout.chunk_ivector_rows),
            "pynnet3.streaming.first-output-frames": str(layout.first_outputs),
            "pynnet3.streaming.chunk-output-frames": str(layout.chunk_outputs),
            "pynnet3.streaming.states": " ".join(layout.states)}
    meta.update(network_metadata(nnet, left, right))
    return _check(g.model(meta, doc="Kaldi's looped (streaming) computation, exported by "
                                    "pynnet3"))


def xvector_model(nnet, source=""):
    """nnet3-xvector-compute's computation of a *prepared* network (its
    'output' node at t = 0 from the frames 0..T-1 of any T) as an ONNX
    ModelProto: input ``input`` [batch, frames, dim], output ``output``
    [batch, 1, dim] (see :mod:`.dynamic`)."""
    if nnet.get_node_index("input") < 0 or nnet.output_dim("output") <= 0:
        raise NnetError("an x-vector network needs an input node 'input' and an output node "
                        "'output'")
    if nnet.input_dim("ivector") > 0:
        raise NnetError("nnet3-xvector-compute gives an x-vector network no i-vector; this "
                        "network has an 'ivector' input")
    lowering = LengthGenericLowering(nnet, 1)
    g = lowering.lower(GraphBuilder("nnet3_xvector"), bind_outputs=(0, 1))
    lo, hi, conditions = lowering.output_computable()
    meta = {KIND_KEY: "xvector", "pynnet3.source": source,
            "pynnet3.output-computable": "%s %s" % (lo, hi),
            "pynnet3.output-computable-if": ";".join("%s %s" % c for c in conditions),
            "nnet3.input-dim": str(nnet.input_dim("input")),
            "nnet3.output-dim": str(nnet.output_dim("output")),
            "nnet3.modulus": str(nnet.modulus())}
    return _check(g.model(meta, doc="nnet3-xvector-compute's computation, exported by pynnet3"))


def export(model, path=None, kind="chunk", *, frames_per_chunk=None, extra_left_context=0,
           extra_right_context=0, extra_left_context_initial=-1, extra_right_context_final=-1,
           frame_subsampling_factor=1, online_ivector_period=0, use_priors=False,
           optimize_options=None, any_length=False):
    """Exports ``model`` (a file name, Nnet or AmNnetSimple; see the module
    docstring) and returns the ONNX ModelProto; with ``path`` also writes it
    there (atomically)."""
    if kind not in ("chunk", "streaming", "xvector"):
        raise UsageError("unknown export kind %r (expected 'chunk', 'streaming' or 'xvector')"
                         % (kind,))
    nnet, priors = read_network(model, use_priors)
    prepare_nnet_for_compute(nnet)
    source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else ""
    if kind == "xvector":
        onnx_model = xvector_model(nnet, source)
    elif kind == "streaming":
        onnx_model = streaming_model(
            nnet, 24 if frames_per_chunk is None else frames_per_chunk,   # Kaldi's defaults
            max(0, extra_left_context_initial), frame_subsampling_factor, priors,
            optimize_options, online_ivector_period, source)
    else:
        opts = SimpleComputationOptions(
            extra_left_context=extra_left_context, extra_right_context=extra_right_context,
            extra_left_context_initial=extra_left_context_initial,
            extra_right_context_final=extra_right_context_final,
            frame_subsampling_factor=frame_subsampling_factor,
            frames_per_chunk=50 if frames_per_chunk is None else frames_per_chunk)
        opts.check()
        onnx_model = chunk_model(nnet, opts, priors, optimize_options, online_ivector_period,
                                 source, any_length)
    if path is not None:
        save_model(onnx_model, path)
    return onnx_model
