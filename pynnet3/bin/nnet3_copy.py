"""nnet3-copy: copy a raw nnet3 network, optionally changing it.

In Kaldi's order: read; apply ``--nnet-config`` (nnet3-init semantics); set
learning rates (``--learning-rate``); scale (``--scale``); apply
``--edits-config`` then ``--edits``; then either prepare for test
(``--prepare-for-test``: batch-norm and dropout test mode, then Kaldi's
CollapseModel) or set batch-norm test mode to ``--batchnorm-test-mode``
(Kaldi always does this, so a copy stores test-mode false by default); write.
"""

import logging
import sys

from ..nnet import component_ops
from ..nnet.collapse import CollapseModelConfig, collapse_model
from ..nnet.edits import apply_edits_string, read_edit_config
from ..nnet.nnet import Nnet
from ..nnet.nnet_config import read_config_file
from ._cli import ToolParser, kaldi_tool

log = logging.getLogger(__name__)

USAGE = """Copy 'raw' nnet3 neural network to standard output
Also supports setting all the learning rates to a value
(the --learning-rate option)

Usage:  nnet3-copy [options] <nnet-in> <nnet-out>
e.g.:
 nnet3-copy --binary=false 0.raw text.raw
"""


def prepare_for_test(nnet):
    """What ``--prepare-for-test=true`` does (Kaldi's order): batch-norm and
    dropout components in test mode, then Kaldi's CollapseModel with its
    default configuration."""
    component_ops.set_batchnorm_test_mode(nnet, True)
    component_ops.set_dropout_test_mode(nnet, True)
    collapse_model(nnet, CollapseModelConfig())


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_bool("binary", True, "Write output in binary mode")
    parser.register_float("learning-rate", -1.0, "If supplied, all the learning rates of "
                          "updatable components are set to this value.")
    parser.register_str("nnet-config", "", "Name of nnet3 config file that can be used to "
                        "add or replace components or nodes of the neural network (the same "
                        "as you would give to nnet3-init).")
    parser.register_str("edits-config", "", "Name of edits-config file that can be used to "
                        "modify the network (applied after nnet-config).  See comments for "
                        "ReadEditConfig()in nnet3/nnet-utils.h to see currently supported "
                        "commands.")
    parser.register_str("edits", "", "Can be used as an inline alternative to edits-config; "
                        "semicolons will be converted to newlines before parsing.  E.g. "
                        "'--edits=remove-orphans'.")
    parser.register_float("scale", 1.0, "The parameter matrices are scaled by the specified "
                          "value.")
    parser.register_bool("prepare-for-test", False, "If true, prepares the model for test "
                         "time (may reduce model size slightly.  Involves setting test mode "
                         "in dropout and batch-norm components, and calling CollapseModel() "
                         "which may remove some components.")
    parser.register_bool("batchnorm-test-mode", False, "Batch-norm components' test mode is "
                         "set to this value. The deafult is false, but is overriden when "
                         "--prepare-for-test is used")
    opts, (nnet_in, nnet_out) = parser.parse(argv, num_args=2)
    nnet = Nnet.read(nnet_in)
    if opts.nnet_config:
        nnet.read_config(read_config_file(opts.nnet_config), opts.nnet_config)
    if opts.learning_rate >= 0:
        component_ops.set_learning_rate(nnet, opts.learning_rate)
    if opts.scale != 1.0:
        component_ops.scale_nnet(nnet, opts.scale)
    if opts.edits_config:
        read_edit_config(nnet, read_config_file(opts.edits_config), opts.edits_config)
    if opts.edits:
        apply_edits_string(nnet, opts.edits)
    if opts.prepare_for_test:
        prepare_for_test(nnet)
    else:
        component_ops.set_batchnorm_test_mode(nnet, opts.batchnorm_test_mode)
    nnet.write(nnet_out, opts.binary)
    log.info("Copied raw neural net from %s to %s", nnet_in, nnet_out)


if __name__ == "__main__":
    sys.exit(main())
