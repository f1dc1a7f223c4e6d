#!/usr/bin/env python3
"""How fast pynnet3 reads and writes a big binary model, against NumPy alone.

Builds (or takes) a ~20M-parameter binary nnet3 model, then in the same run
times, best of ``--repeat``:

  pynnet3   Nnet.read(model) + nnet.write(copy, binary)      (parse + serialize)
  numpy     np.fromfile(model) + array.tofile(copy)          (the same bytes, raw)

and prints both and their ratio (target: pynnet3 <= 2x NumPy). The written copy
must equal the input byte for byte (checked).

Usage:
  python scripts/bench_io.py                      # builds tdnnf_full from kaldi-ref
  python scripts/bench_io.py --model big.raw      # any binary raw model or .mdl
  python scripts/bench_io.py --config final.config
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pynnet3.model.am import read_mdl, write_mdl  # noqa: E402
from pynnet3.nnet.nnet import Nnet  # noqa: E402
from pynnet3.nnet.component_ops import num_parameters  # noqa: E402

DEFAULT_CONFIG = REPO.parent / "shared" / "kaldi-ref" / "bench" / "models" / "tdnnf_full" / \
    "final.config"


def build_model(config, path):
    """nnet3-init's work: the network of ``config`` (paths in it are relative
    to its folder), written in binary to ``path``."""
    here = os.getcwd()
    os.chdir(Path(config).resolve().parent)
    try:
        nnet = Nnet.from_config(str(Path(config).resolve()))
    finally:
        os.chdir(here)
    nnet.write(str(path), binary=True)
    return nnet


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="existing binary model (.raw or .mdl) to use")
    ap.add_argument("--config", default=str(DEFAULT_CONFIG),
                    help="nnet3 config to build the model from (default: kaldi-ref tdnnf_full)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tmpdir", default=None)
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(dir=args.tmpdir) as tmp:
        tmp = Path(tmp)
        if args.model:
            model = Path(args.model)
        else:
            model = tmp / "model.raw"
            start = time.perf_counter()
            build_model(args.config, model)
            print("built %s in %.2f s" % (args.config, time.perf_counter() - start))
        data = model.read_bytes()
        is_mdl = data[2:20].startswith(b"<TransitionModel>")
        out = tmp / "copy"
        np_out = tmp / "np-copy"

        if is_mdl:
            def ours():
                tm, am = read_mdl(str(model))
                write_mdl(str(out), tm, am, True)
            nnet = read_mdl(str(model))[1].nnet
        else:
            def ours():
                Nnet.read(str(model)).write(str(out), binary=True)
            nnet = Nnet.read(str(model))

        def numpy_io():
            np.fromfile(str(model), dtype=np.uint8).tofile(str(np_out))

        # Separate read and write timings, for the record.
        def read_only():
            return read_mdl(str(model)) if is_mdl else Nnet.read(str(model))
        loaded = read_only()

        def write_only():
            if is_mdl:
                write_mdl(str(out), loaded[0], loaded[1], True)
            else:
                loaded.write(str(out), binary=True)
        buf = np.fromfile(str(model), dtype=np.uint8)

        numpy_io()  # warm the page cache and the allocator
        ours()
        t_numpy = best_of(args.repeat, numpy_io)
        t_ours = best_of(args.repeat, ours)
        t_read = best_of(args.repeat, read_only)
        t_write = best_of(args.repeat, write_only)
        t_np_read = best_of(args.repeat, lambda: np.fromfile(str(model), dtype=np.uint8))
        t_np_write = best_of(args.repeat, lambda: buf.tofile(str(np_out)))

        same = out.read_bytes() == data
        print("model: %s, %d bytes, %d components, %.1fM parameters"
              % (model.name if args.model else "tdnnf_full (built)", len(data),
                 nnet.num_components(), num_parameters(nnet) / 1e6))
        print("pynnet3 read+write : %.3f s   (read %.3f s, write %.3f s)"
              % (t_ours, t_read, t_write))
        print("numpy   read+write : %.3f s   (read %.3f s, write %.3f s)"
              % (t_numpy, t_np_read, t_np_write))
        print("ratio pynnet3/numpy: %.2fx   (target <= 2x)   byte-identical copy: %s"
              % (t_ours / t_numpy, same))
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
