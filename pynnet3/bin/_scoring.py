"""What the scoring tools (compute-wer, compute-wer-bootci) share: the
``--mode`` option, registered and checked as Kaldi does."""

from ..errors import PynnetError

MODES = ("present", "all", "strict")


def register_mode_option(parser):
    """--mode, as compute-wer and compute-wer-bootci register it (read back
    with :func:`scoring_mode`)."""
    parser.register_str("mode", "strict",
                        'Scoring mode: "present"|"all"|"strict":\n'
                        '  "present" means score those we have transcriptions for\n'
                        '  "all" means treat absent transcriptions as empty\n'
                        '  "strict" means die if all in ref not also in hyp')


def scoring_mode(opts):
    """The --mode value, checked as Kaldi checks it."""
    if opts.mode not in MODES:
        raise PynnetError('--mode option invalid: expected "present"|"all"|"strict", got '
                          + opts.mode)
    return opts.mode
