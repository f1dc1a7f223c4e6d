"""The shipped example files: their names, what each holds, and where they
are (see :mod:`pynnet3.examples`)."""

from importlib import resources

from ..errors import PynnetError

__all__ = ["FILES", "path"]

#: The shipped files, name -> what it holds.
FILES = {
    "tdnn_lda.raw": "acoustic network (raw nnet3, binary)",
    "tdnn_lda.info.txt": "nnet3-info tdnn_lda.raw",
    "final.mdl": "the same network as an acoustic model (transition model, priors)",
    "final.am-info.txt": "nnet3-am-info final.mdl",
    "feats.ark": "features of utt1..utt4 (13-dim; 7, 50, 173, 301 frames)",
    "online-ivectors.ark": "online i-vectors of utt1..utt4 (10-dim, one per 10 frames)",
    "ivectors.ark": "one i-vector per utterance (10-dim)",
    "compute.apply_exp.ark": "Kaldi's nnet3-compute output (online i-vectors, --apply-exp)",
    "compute.apply_exp.cmd": "the command that wrote compute.apply_exp.ark",
    "compute.apply_exp.log": "its log",
    "compute.ivectors.ark": "Kaldi's nnet3-compute output (--ivectors=ark:ivectors.ark)",
    "compute.ivectors.cmd": "the command that wrote compute.ivectors.ark",
    "compute.ivectors.log": "its log",
    "HCLG.fst": "decoding graph (16 words, word loop)",
    "words.txt": "word symbol table of HCLG.fst",
    "lat.narrow.ark": "Kaldi's nnet3-latgen-faster lattices (narrow beams)",
    "words.narrow.txt": "their best-path words (integers)",
    "ali.narrow.txt": "their best-path alignments (transition-ids)",
    "decode.narrow.cmd": "the command that wrote lat/words/ali.narrow",
    "decode.narrow.log": "its log",
    "xvector.raw": "x-vector extractor network",
    "xvector.info.txt": "nnet3-info xvector.raw",
    "xvector-feats.ark": "features for the x-vector network (23-dim, 4 utterances)",
    "xvector.default.ark": "Kaldi's nnet3-xvector-compute x-vectors",
    "xvector.default.cmd": "the command that wrote xvector.default.ark",
    "xvector.default.log": "its log",
}


def path(name):
    """The location of a shipped example file.

    Args:
        name: the file's name, one of :data:`FILES` (e.g. ``"final.mdl"``).

    Returns:
        The file's path (a str): a real file on disk, wherever pynnet3 is
        installed.

    Raises:
        PynnetError: ``name`` is not an example file, or the installed
            package lacks it.

    Example::

        import pynnet3
        from pynnet3 import examples

        nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    """
    if name not in FILES:
        raise PynnetError("'%s' is not an example file (the examples are: %s)"
                          % (name, ", ".join(sorted(FILES))))
    location = resources.files(__package__).joinpath(name)
    if not location.is_file():
        raise PynnetError("example file %s is missing from the installed package "
                          "(expected at %s)" % (name, location))
    return str(location)
