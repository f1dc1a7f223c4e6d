"""ali-to-phones: alignments (transition-ids) to phone sequences, as Kaldi's
ali-to-phones (SplitToPhones): the phones, or one phone per frame
(--per-frame), or (phone, number of frames) pairs (--write-lengths), or a
CTM file (--ctm-output)."""

import logging
import sys

import numpy as np

from ..errors import UsageError
from ..hmm.hmm_utils import split_to_phones
from ..hmm.transition import TransitionModel
from ..io.files import OutputSink
from ..io.table import SequentialTableReader, TableWriter
from ._cli import ToolParser, kaldi_tool

logger = logging.getLogger("pynnet3")

USAGE = """Convert model-level alignments to phone-sequences (in integer, not text, form)
Usage:  ali-to-phones  [options] <model> <alignments-rspecifier> <phone-transcript-wspecifier|ctm-wxfilename>
e.g.: 
 ali-to-phones 1.mdl ark:1.ali ark:-
or:
 ali-to-phones --ctm-output 1.mdl ark:1.ali 1.ctm
See also: show-alignments lattice-align-phones, compare-int-vector
"""


def _ctm_lines(key, phones, frame_shift, decimals):
    """Kaldi's CTM lines (start and duration in float, as its BaseFloat sums)."""
    out = []
    start = np.float32(0.0)
    shift = np.float32(frame_shift)
    for phone, count in phones:
        duration = np.float32(shift * np.float32(count))
        out.append("%s 1 %.*f %.*f %d\n" % (key, decimals, start, decimals, duration, phone))
        start = np.float32(start + duration)
    return out


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_bool("ctm-output", False, "If true, output the alignments in ctm format "
                         "(the confidences will be set to 1)")
    parser.register_float("frame-shift", 0.01,
                          "frame shift used to control the times of the ctm output")
    parser.register_bool("per-frame", False, "If true, write out the frame-level phone "
                         "alignment (else phone sequence)")
    parser.register_bool("write-lengths", False,
                         "If true, write the #frames for each phone (different format)")
    opts, (model_in, ali_rspecifier, out_spec) = parser.parse(argv, num_args=3)
    if opts.per_frame and opts.write_lengths:
        raise UsageError("--per-frame and --write-lengths are incompatible options")
    trans_model = TransitionModel.read(model_in)
    if opts.ctm_output:
        writer = OutputSink(out_spec)
        decimals = 2 if opts.frame_shift >= np.float32(0.01) else 3
    else:
        writer = TableWriter(out_spec, "int32_pair_vector" if opts.write_lengths
                             else "int32_vector")
    n_done = 0
    try:
        for key, alignment in SequentialTableReader(ali_rspecifier, "int32_vector"):
            pieces, _ok = split_to_phones(trans_model, alignment)
            phones = [(trans_model.transition_id_to_phone(p[0]), len(p)) for p in pieces]
            if opts.ctm_output:
                writer.write("".join(_ctm_lines(key, phones, opts.frame_shift,
                                                decimals)).encode())
            elif opts.write_lengths:
                writer.write(key, phones)
            elif opts.per_frame:
                writer.write(key, [ph for ph, count in phones for _ in range(count)])
            else:
                writer.write(key, [ph for ph, _ in phones])
            n_done += 1
        writer.close()
    except BaseException:
        writer.abort()
        raise
    logger.info("Done %d utterances.", n_done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
