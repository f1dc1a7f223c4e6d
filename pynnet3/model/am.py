"""Kaldi's AmNnetSimple and the nnet3 ``.mdl`` file.

An nnet3 acoustic model file (``final.mdl``) is Kaldi's
``TransitionModel::Write`` followed by ``AmNnetSimple::Write``:

  <TransitionModel> ... </TransitionModel>
  <Nnet3> ... </Nnet3> <LeftContext> int <RightContext> int <Priors> vector

(one ``\\0B`` header at the start in binary mode). ``AmNnetSimple.read`` of
a ``.mdl`` keeps the transition model in ``am.transition_model`` and
``am.write`` writes it back in front, so a ``.mdl`` round-trips through the
one object; :func:`read_mdl` / :func:`write_mdl` handle the pair explicitly.

Guarantees: reading then writing (either mode) reproduces Kaldi's bytes for
the same content; :meth:`AmNnetSimple.info` is Kaldi's ``AmNnetSimple::Info()``
(what ``nnet3-am-info`` prints).
"""

import logging

import numpy as np

from ..common.floats import kaldi_str
from ..errors import NnetError, UsageError
from ..hmm.transition import TransitionModel
from ..io.files import open_input, write_object
from ..io.stream import OutputStream
from ..nnet.nnet import Nnet, is_simple_nnet, read_am_nnet_simple
from ..numerics import kaldi_cpu
from .context import compute_simple_nnet_context
from .info import nnet_info

logger = logging.getLogger(__name__)


class AmNnetSimple:
    """Kaldi's AmNnetSimple, the network of an nnet3 acoustic model
    (``final.mdl``) and what an acoustic model needs around it.

    Attributes: ``nnet`` (the Nnet), ``priors`` (float32 vector of the
    output's priors, empty when none are set: ``nnet3-compute
    --use-priors`` and the decoders subtract their logs),
    ``left_context`` / ``right_context`` (the network's), and
    ``transition_model`` (the TransitionModel a ``.mdl`` carries in front of
    it, None otherwise). :meth:`read` then :meth:`write` reproduce Kaldi's
    bytes; :meth:`info` is what ``nnet3-am-info`` prints.

    Args:
        nnet: the network (None: an empty one).
        priors: the priors (None: none).
        transition_model: a TransitionModel, written in front by :meth:`write`.

    Raises:
        PynnetError: :meth:`read` raises KaldiFormatError on a file that is
            not a ``.mdl`` (the message names the file and byte offset).

    Example::

        import pynnet3
        from pynnet3 import examples

        am = pynnet3.AmNnetSimple.read(examples.path("final.mdl"))
        print(am.num_pdfs(), am.priors.shape, am.transition_model.num_transition_ids())
        am.nnet.write("final.raw")                 # as nnet3-am-copy --raw=true
        am.write("copy.mdl", binary=False)         # as nnet3-am-copy --binary=false
        print(open("copy.mdl").readline().strip())

    Output::

        30 (30,) 60
        <TransitionModel>
    """

    __slots__ = ("nnet", "left_context", "right_context", "priors", "transition_model")

    def __init__(self, nnet=None, priors=None, transition_model=None):
        self.transition_model = transition_model
        self.nnet = Nnet() if nnet is None else nnet
        self.left_context = 0
        self.right_context = 0
        self.priors = (np.zeros(0, dtype=np.float32) if priors is None
                       else np.asarray(priors, dtype=np.float32))
        if nnet is not None:
            self.set_context()

    # -- I/O ---------------------------------------------------------------------
    @classmethod
    def read(cls, rxfilename):
        """Reads an nnet3 acoustic model.

        Args:
            rxfilename: a ``.mdl`` (its transition model is kept in
                ``transition_model``), or a file holding only an AmNnetSimple;
                text or binary; a file, ``-`` or ``command |``.

        Returns:
            A new AmNnetSimple.

        Raises:
            KaldiFormatError: not such a file (names the file and offset).
        """
        stream = open_input(rxfilename)
        trans_model = None
        if stream.peek_token() == "<TransitionModel>":
            trans_model = TransitionModel().read_from(stream)
        am_nnet = cls().read_from(stream)
        am_nnet.transition_model = trans_model
        return am_nnet

    def write(self, wxfilename, binary=True):
        """Writes the ``.mdl`` as ``nnet3-am-copy`` does (transition model
        first, when there is one): Kaldi's bytes. A file appears only once
        complete.

        Args:
            wxfilename: a file, ``-`` or ``| command``.
            binary: binary (True) or text form.

        Returns:
            None.
        """
        def write_all(stream):
            if self.transition_model is not None:
                self.transition_model.write_to(stream)
            self.write_to(stream)
        write_object(wxfilename, binary, write_all)

    def read_from(self, stream):
        """Kaldi's AmNnetSimple::Read; returns self. Like Kaldi, the stored
        contexts are replaced by recomputed ones."""
        nnet, _, _, priors = read_am_nnet_simple(stream)
        self.nnet = nnet
        self.left_context, self.right_context = compute_simple_nnet_context(nnet)
        self.priors = priors
        return self

    def write_to(self, stream):
        """Kaldi's AmNnetSimple::Write."""
        self.nnet.write_to(stream)
        stream.write_token("<LeftContext>")
        stream.write_int32(self.left_context)
        stream.write_token("<RightContext>")
        stream.write_int32(self.right_context)
        stream.write_token("<Priors>")
        stream.write_vector(self.priors)

    # -- Kaldi's accessors -------------------------------------------------------
    def num_pdfs(self):
        """Kaldi's NumPdfs.

        Returns:
            The number of pdfs: the dimension of the network's ``output``.

        Raises:
            NnetError: the network has no ``output`` node.
        """
        ans = self.nnet.output_dim("output")
        if ans <= 0:
            raise NnetError("the acoustic model's network has no output node 'output'")
        return ans

    def set_nnet(self, nnet):
        """Replaces the network (Kaldi's SetNnet): recomputes the context and
        drops the priors if their dimension no longer matches."""
        self.nnet = nnet
        self.set_context()
        if self.priors.shape[0] not in (0, nnet.output_dim("output")):
            logger.warning(
                "Removing priors since there is a dimension mismatch after changing the "
                "nnet: %d vs. %d", self.priors.shape[0], nnet.output_dim("output"))
            self.priors = np.zeros(0, dtype=np.float32)

    def set_priors(self, priors):
        priors = np.asarray(priors, dtype=np.float32)
        if priors.shape[0] not in (0, self.nnet.output_dim("output")):
            raise NnetError("dimension mismatch when setting priors: priors have dim %d, "
                            "model expects %d" % (priors.shape[0],
                                                  self.nnet.output_dim("output")))
        self.priors = priors

    def set_context(self):
        """Recomputes left/right context from the network (Kaldi's SetContext);
        the network must be a 'simple' one (an 'input' node and an 'output'
        node, optionally an 'ivector' input)."""
        if not is_simple_nnet(self.nnet):
            raise NnetError("AmNnetSimple is only for 'simple' networks (an input node "
                            "'input', an output node 'output', optionally an input "
                            "'ivector'), and this one is not")
        self.left_context, self.right_context = compute_simple_nnet_context(self.nnet)

    def info(self):
        """Kaldi's AmNnetSimple::Info() followed by the network's Info():
        what ``nnet3-am-info`` prints.

        Returns:
            The text (str).
        """
        lines = ["input-dim: %d" % self.nnet.input_dim("input"),
                 "ivector-dim: %d" % self.nnet.input_dim("ivector"),
                 "num-pdfs: %d" % self.nnet.output_dim("output"),
                 "prior-dimension: %d" % self.priors.shape[0]]
        if self.priors.shape[0]:
            p = self.priors
            lines.append("prior-sum: " + kaldi_str(np.float32(p.astype(np.float64).sum())))
            lines.append("prior-min: " + kaldi_str(p.min()))
            lines.append("prior-max: " + kaldi_str(p.max()))
        lines.append("# Nnet info follows.")
        # Kaldi's Nnet::Info() recomputes the context from the network
        return "\n".join(lines) + "\n" + nnet_info(self.nnet)


def read_mdl_from(stream):
    """(TransitionModel, AmNnetSimple) from a stream at the start of a .mdl."""
    trans_model = TransitionModel().read_from(stream)
    am_nnet = AmNnetSimple(transition_model=trans_model).read_from(stream)
    return trans_model, am_nnet


def read_mdl(rxfilename):
    """(TransitionModel, AmNnetSimple) from an nnet3 ``.mdl`` rxfilename."""
    return read_mdl_from(open_input(rxfilename))


def write_mdl_to(stream, trans_model, am_nnet):
    trans_model.write_to(stream)
    am_nnet.write_to(stream)


def write_mdl(wxfilename, trans_model, am_nnet, binary=True):
    """Writes a .mdl as Kaldi's nnet3-am-copy does (atomic for files)."""
    write_object(wxfilename, binary,
                 lambda stream: write_mdl_to(stream, trans_model, am_nnet))


def mdl_to_bytes(trans_model, am_nnet, binary=True):
    """The bytes :func:`write_mdl` would write."""
    stream = OutputStream(binary)
    stream.write_header()
    write_mdl_to(stream, trans_model, am_nnet)
    return stream.getvalue()


def log_priors(priors, output_dim):
    """The log of an acoustic model's priors as Kaldi's decodables take it
    (ApplyLog: the C library's logf), or None when there are none; UsageError
    for priors of another dimension than the network's output, or negative
    ones."""
    if priors is None or len(priors) == 0:
        return None
    priors = np.asarray(priors, dtype=np.float32)
    if priors.shape != (output_dim,):
        raise UsageError("priors have dimension %d but the network's output has "
                         "dimension %d" % (priors.size, output_dim))
    if (priors < 0).any():
        raise UsageError("Trying to take log of a negative number (the priors)")
    # the C library's logf (NumPy's float32 log differs in the last bit now and then)
    return kaldi_cpu.apply_log(priors)
