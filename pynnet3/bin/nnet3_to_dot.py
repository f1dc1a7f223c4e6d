"""nnet3-to-dot: draw a network as a Graphviz graph (DOT text, and optionally a
picture made by Graphviz's ``dot``).

Kaldi has no binary of this name; its recipes draw networks with
``steps/nnet3/nnet3_to_dot.sh`` (``nnet3-am-info`` piped into
``steps/nnet3/dot/nnet3_to_dot.py``, then ``dot``). This tool does the same in one
step, from the model file itself, for every Descriptor kind, and keeps that
script's option names where they mean the same (``--node-prefixes``,
``--component-attributes``). What is drawn: :mod:`pynnet3.drawing`.

Outputs appear complete or not at all: the picture (if asked for) is made
first, then the DOT text is written; a missing ``dot`` program or an unknown
picture format is reported before anything is written.
"""

import logging
import sys

from ..drawing import (DEFAULT_COMPONENT_ATTRIBUTES, nnet_to_dot, picture_format,
                       write_picture)
from ..io.files import write_bytes
from ..nnet.nnet import Nnet
from ._cli import ToolParser, kaldi_tool

log = logging.getLogger(__name__)

USAGE = """Draw an nnet3 neural network as a graph: writes it in Graphviz's DOT
language to <dot-out> and, if <picture-out> is given, a picture of it made by
Graphviz's 'dot' program (format from the file name: .svg, .png, .pdf, .ps, .eps,
.jpg, .gif).  Reads raw networks and acoustic models (.mdl), text or binary.
Shows input, component, dim-range and output nodes with their dims, every
Descriptor (Append, Sum, Scale, Const, Failover, IfDefined, Switch, Offset,
Round, ReplaceIndex), and xconfig layers (nodes named LAYER.something) grouped.

Usage:  nnet3-to-dot [options] <nnet-in> <dot-out> [<picture-out>]
e.g.:
 nnet3-to-dot final.mdl final.dot final.svg
 nnet3-to-dot --expand-layers=false final.raw - | dot -Tpng > final.png
See also: nnet3-info
"""


@kaldi_tool
def main(argv=None):
    parser = ToolParser(USAGE)
    parser.register_bool("expand-layers", True, "If true, each xconfig layer (nodes "
                         "whose names share the prefix before the first '.') is drawn as "
                         "a labelled box around its nodes; if false, as one node showing "
                         "the layer's input and output dims.")
    parser.register_str("node-prefixes", "", "Comma-separated list of extra layer "
                        "prefixes: nodes whose names start with one of them are grouped "
                        "under it (the longest wins), e.g. 'lstm1,lstm2'.")
    parser.register_str("component-attributes", ",".join(DEFAULT_COMPONENT_ATTRIBUTES),
                        "Comma-separated list of fields of a component's info "
                        "(as nnet3-info prints them, e.g. time-offsets,learning-rate) to "
                        "show in its node; the node name, component type and dims are "
                        "always shown.")
    parser.register_bool("use-color", True, "If true, fill nodes with colours by kind.")
    opts, args = parser.parse(argv, num_args=(2, 3))
    nnet_in, dot_out = args[0], args[1]
    picture = args[2] if len(args) == 3 else None
    if picture is not None:
        picture_format(picture)
    nnet = Nnet.read(nnet_in)
    text = nnet_to_dot(nnet, expand_layers=opts.expand_layers,
                       node_prefixes=opts.node_prefixes, use_color=opts.use_color,
                       component_attributes=opts.component_attributes)
    if picture is not None:
        write_picture(text, picture)
        log.info("Wrote picture of %s to %s", nnet_in, picture)
    write_bytes(dot_out, text.encode("utf-8"))
    log.info("Wrote graph of %s (%d nodes) in DOT format to %s", nnet_in,
             nnet.num_nodes(), dot_out)


if __name__ == "__main__":
    sys.exit(main())
