#!/usr/bin/env python3
"""Draws every kaldi-ref network with pynnet3.drawing and checks each graph.

Every network file under ``kaldi-ref/models`` (``*.raw``, ``*.mdl``, text and
binary, the x-vector ``extract.raw``) and every ``random/caseN/model.raw`` is
read and drawn twice (layers expanded and collapsed); each DOT text must pass
the structural checker of ``tests/dot_syntax.py`` (balanced braces, unique node
ids, declared edge endpoints, existing ports) and, where Graphviz is installed,
``dot -Tsvg`` must exit 0. tests/test_drawing.py does the same on a sample.

With ``--png DIR``, also writes one PNG per model family (``models/NAME/model.raw``)
and for ``--random-case N`` into DIR, layers expanded (and ``NAME.collapsed.png``).

Usage: scripts/draw_sweep.py [--kaldi-ref DIR] [--png DIR] [--random-case N]
"""

import argparse
import glob
import logging
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from dot_syntax import parse_dot  # noqa: E402
from pynnet3.drawing import nnet_to_dot, write_picture  # noqa: E402
from pynnet3.nnet.nnet import Nnet  # noqa: E402


def network_files(kaldi_ref):
    models = os.path.join(kaldi_ref, "models")
    files = []
    for pattern in ("*/*.raw", "*/*.mdl", "*/model.txt", "*/kaldi-copy.txt-to-txt.txt"):
        files += glob.glob(os.path.join(models, pattern))
    cases = sorted(glob.glob(os.path.join(kaldi_ref, "random", "case*", "model.raw")),
                   key=lambda p: int(os.path.basename(os.path.dirname(p))[4:]))
    return sorted(set(files)) + cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kaldi-ref", default=os.environ.get(
        "PYNNET3_KALDI_REF", os.path.join(HERE, "..", "..", "shared", "kaldi-ref")))
    parser.add_argument("--png", help="write one PNG per model family into this folder")
    parser.add_argument("--random-case", type=int, default=17,
                        help="the random case drawn with --png (default 17)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)   # not the orphan-node warnings of every case
    have_dot = shutil.which("dot") is not None
    if not have_dot:
        print("Graphviz's dot is not installed: checking the DOT text only")
    files = network_files(args.kaldi_ref)
    if not files:
        sys.exit("no networks found under %s" % args.kaldi_ref)
    failures = 0
    start = time.time()
    for path in files:
        name = os.path.relpath(path, args.kaldi_ref)
        try:
            nnet = Nnet.read(path)
            for expand in (True, False):
                text = nnet_to_dot(nnet, expand_layers=expand)
                parse_dot(text)
                if have_dot:
                    proc = subprocess.run(["dot", "-Tsvg", "-o", os.devnull],
                                          input=text.encode(), stderr=subprocess.PIPE)
                    if proc.returncode != 0:
                        raise RuntimeError("dot -Tsvg failed: %s"
                                           % proc.stderr.decode().strip())
        except Exception as e:  # report every failing network, then fail
            failures += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
    print("%d networks drawn (layers expanded and collapsed), %d failed, %s, %.1f s"
          % (len(files), failures, "dot -Tsvg checked" if have_dot else "DOT text only",
             time.time() - start))
    if args.png:
        os.makedirs(args.png, exist_ok=True)
        families = sorted(glob.glob(os.path.join(args.kaldi_ref, "models", "*", "model.raw")))
        families.append(os.path.join(args.kaldi_ref, "random", "case%d" % args.random_case,
                                     "model.raw"))
        for path in families:
            family = os.path.basename(os.path.dirname(path))
            nnet = Nnet.read(path)
            write_picture(nnet_to_dot(nnet), os.path.join(args.png, family + ".png"))
            write_picture(nnet_to_dot(nnet, expand_layers=False),
                          os.path.join(args.png, family + ".collapsed.png"))
            print("wrote %s.png, %s.collapsed.png" % (family, family))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
