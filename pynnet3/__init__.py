"""pynnet3: Kaldi's nnet3 neural-network framework in Python.

What a user needs, by task (each name's docstring has its arguments,
returns, errors and an example; ``docs/api.md`` collects them):

- models: :class:`Nnet` (``.raw`` networks, nnet3 configs), :func:`nnet_info`
  (``nnet3-info``'s text), :class:`AmNnetSimple`
  (``.mdl`` acoustic models: transition model, network, priors),
  :func:`prepare_for_test` (what Kaldi's tools do to a network before
  computing);
- Kaldi tables and objects: :func:`read_table`, :func:`open_table`,
  :func:`write_table`, :class:`TableWriter`, :func:`read_object`,
  :func:`write_object` (archives, scp, pipes; matrices, vectors, lattices, ...);
- computing as Kaldi's tools do: :func:`compute_utterance`,
  :func:`compute_table` (``nnet3-compute``), :func:`compute_xvector`
  (``nnet3-xvector-compute``), :class:`DecodableNnetLoopedOnline` (streaming);
- decoding: :class:`Decoder`, :func:`decode` (``nnet3-latgen-faster``);
- any computation, Kaldi's way: :class:`ComputationRequest`, :func:`compile`,
  :class:`NnetComputer`;
- pictures of networks: :func:`draw` (``nnet3-to-dot``);
- errors: :class:`PynnetError` (every error pynnet3 raises on bad input);
- ``pynnet3.examples``: a small Kaldi model set shipped with the package.

Everything else lives in the subpackages (``pynnet3.nnet``, ``pynnet3.model``,
``pynnet3.compiler``, ``pynnet3.driver``, ``pynnet3.compute``,
``pynnet3.decoding``, ``pynnet3.io``, ...; ``docs/architecture.md`` maps
them), importable from their modules. Names are imported on first use, so ``import pynnet3`` is
cheap and a problem in one subpackage cannot break importing another.

Example::

    import pynnet3
    from pynnet3 import examples

    nnet = pynnet3.Nnet.read(examples.path("tdnn_lda.raw"))
    print(pynnet3.nnet_info(nnet).splitlines()[0])
"""

import importlib

from . import log as _log  # noqa: F401  (Kaldi-style log lines for library use)

__version__ = "0.1.0"

# public name -> (module, attribute)
_EXPORTS = {
    "Nnet": ("pynnet3.nnet.nnet", "Nnet"),
    "AmNnetSimple": ("pynnet3.model.am", "AmNnetSimple"),
    "nnet_info": ("pynnet3.model.info", "nnet_info"),
    "read_table": ("pynnet3.tables", "read_table"),
    "open_table": ("pynnet3.tables", "open_table"),
    "write_table": ("pynnet3.tables", "write_table"),
    "TableWriter": ("pynnet3.tables", "TableWriter"),
    "read_object": ("pynnet3.tables", "read_object"),
    "write_object": ("pynnet3.tables", "write_object"),
    "compute_utterance": ("pynnet3.compute.api", "compute_utterance"),
    "compute_table": ("pynnet3.compute.api", "compute_table"),
    "compute_xvector": ("pynnet3.compute.api", "compute_xvector"),
    "prepare_for_test": ("pynnet3.compute.api", "prepare_for_test"),
    "DecodableNnetLoopedOnline": ("pynnet3.compute.decodable_simple_looped",
                                  "DecodableNnetLoopedOnline"),
    "Decoder": ("pynnet3.decoding.api", "Decoder"),
    "decode": ("pynnet3.decoding.api", "decode"),
    "ComputationRequest": ("pynnet3.compiler.request", "ComputationRequest"),
    "compile": ("pynnet3.driver.compile_and_optimize", "compile"),
    "NnetComputer": ("pynnet3.compute.computer", "NnetComputer"),
    "draw": ("pynnet3.drawing", "draw"),
    "PynnetError": ("pynnet3.errors", "PynnetError"),
}

# subpackages reachable as attributes without importing them first
_SUBPACKAGES = frozenset(("examples",))

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _SUBPACKAGES:
        return importlib.import_module("pynnet3." + name)
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError("module 'pynnet3' has no attribute %r" % name)
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | _SUBPACKAGES)
