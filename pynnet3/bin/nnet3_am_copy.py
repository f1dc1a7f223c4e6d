"""nnet3-am-copy: copy an nnet3 acoustic model (.mdl), optionally changing it.

In Kaldi's order: read the model; ``--set-raw-nnet`` replaces the network;
``--nnet-config`` adds/replaces nodes and components (nnet3-init semantics);
``--convert-repeated-to-block``; ``--learning-rate``; ``--edits-config`` then
``--edits``; the left/right context is recomputed; ``--scale``;
``--prepare-for-test`` (batch-norm and dropout test mode, then Kaldi's
CollapseModel; the context stays as computed before, as in Kaldi); write the
model (or only the network with ``--raw=true``), binary unless
``--binary=false``.
"""

import logging
import sys

from ..components.repeated_affine import BlockAffineComponent, RepeatedAffineComponent
from ..errors import PynnetError
from ..io.files import read_bytes
from ..model.am import read_mdl, write_mdl
from ..nnet.collapse import CollapseModelConfig, collapse_model
from ..nnet.component_ops import (scale_nnet, set_batchnorm_test_mode, set_dropout_test_mode,
                                  set_learning_rate)
from ..nnet.edits import apply_edits_string, read_edit_config
from ..nnet.nnet import Nnet
from ._cli import ToolParser, kaldi_tool

log = logging.getLogger(__name__)

USAGE = """Copy an nnet3 acoustic model (transition model + network + priors), optionally
converting it to a raw network (--raw=true), replacing its network
(--set-raw-nnet), changing its structure (--nnet-config, --edits,
--edits-config), its learning rates (--learning-rate) or scaling its
parameters (--scale).

Usage:  nnet3-am-copy [options] <nnet-in> <nnet-out>
e.g.:
 nnet3-am-copy --binary=false 1.mdl text.mdl
 nnet3-am-copy --raw=true 1.mdl 1.raw
"""


def _read_text(rxfilename, what):
    data, offset = read_bytes(rxfilename)
    try:
        return data[offset:].decode("utf-8")
    except UnicodeDecodeError:
        raise PynnetError("%s %s is not a text file" % (what, rxfilename)) from None


def convert_repeated_to_block_affine(nnet):
    """Kaldi's ConvertRepeatedToBlockAffine: every (NaturalGradient)
    RepeatedAffineComponent, also inside CompositeComponents, becomes an
    equivalent BlockAffineComponent."""

    def convert(components):
        for i, comp in enumerate(components):
            if isinstance(comp, RepeatedAffineComponent):
                components[i] = BlockAffineComponent.from_repeated_affine(comp)
            elif comp.type_name == "CompositeComponent":
                convert(comp.components)
    convert(nnet.components)


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_bool("binary", True, "Write the output in binary mode")
    parser.register_bool("raw", False, "Write only the raw network (no transition model "
                         "and priors)")
    parser.register_str("set-raw-nnet", "", "Replace the model's network with the raw "
                        "network in this rxfilename (done before --learning-rate)")
    parser.register_bool("convert-repeated-to-block", False,
                         "Convert every RepeatedAffineComponent and "
                         "NaturalGradientRepeatedAffineComponent to a BlockAffineComponent "
                         "(done after --set-raw-nnet)")
    parser.register_str("nnet-config", "", "An nnet3 config file (as for nnet3-init) that "
                        "adds or replaces components or nodes of the network")
    parser.register_str("edits-config", "", "A file of edit directives applied to the "
                        "network (after --nnet-config); see pynnet3.nnet.edits")
    parser.register_str("edits", "", "Edit directives given inline, ';' separating lines "
                        "(applied after --edits-config), e.g. '--edits=remove-orphans'")
    parser.register_float("learning-rate", -1.0, "If >= 0, set the learning rate of every "
                          "updatable component to this value")
    parser.register_float("scale", 1.0, "Scale the network's parameters by this value")
    parser.register_bool("prepare-for-test", False, "If true, prepares the model for test "
                         "time (may reduce model size slightly.  Involves setting test mode "
                         "in dropout and batch-norm components, and calling CollapseModel() "
                         "which may remove some components.")
    opts, args = parser.parse(argv, num_args=2)
    nnet_rxfilename, nnet_wxfilename = args

    trans_model, am_nnet = read_mdl(nnet_rxfilename)
    structure_changed = False
    if opts.set_raw_nnet:
        am_nnet.set_nnet(Nnet.read(opts.set_raw_nnet))
        structure_changed = True
    if opts.nnet_config:
        am_nnet.nnet.read_config(_read_text(opts.nnet_config, "config file"),
                                 opts.nnet_config)
        structure_changed = True
    if opts.convert_repeated_to_block:
        convert_repeated_to_block_affine(am_nnet.nnet)
    if opts.learning_rate >= 0:
        set_learning_rate(am_nnet.nnet, opts.learning_rate)
    if opts.edits_config:
        read_edit_config(am_nnet.nnet, _read_text(opts.edits_config, "edits config"),
                         opts.edits_config)
        structure_changed = True
    if opts.edits:
        apply_edits_string(am_nnet.nnet, opts.edits)
        structure_changed = True
    if structure_changed:
        # Kaldi always recomputes; an unchanged network keeps the same context.
        am_nnet.set_context()
    if opts.scale != 1.0:
        scale_nnet(am_nnet.nnet, opts.scale)
    if opts.prepare_for_test:
        set_batchnorm_test_mode(am_nnet.nnet, True)
        set_dropout_test_mode(am_nnet.nnet, True)
        collapse_model(am_nnet.nnet, CollapseModelConfig())

    if opts.raw:
        am_nnet.nnet.write(nnet_wxfilename, opts.binary)
        log.info("Copied neural net from %s to raw format as %s",
                 nnet_rxfilename, nnet_wxfilename)
    else:
        write_mdl(nnet_wxfilename, trans_model, am_nnet, opts.binary)
        log.info("Copied neural net from %s to %s", nnet_rxfilename, nnet_wxfilename)


if __name__ == "__main__":
    sys.exit(main())
