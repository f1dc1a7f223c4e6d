"""Kaldi nnet3 networks as standard ONNX models (default-domain operators
only), run by onnxruntime.

This is the export layer: it uses the compiler, the optimizer and the chunk
logic of the compute layer, and only the command-line tools
(``nnet3-to-onnx``, ``nnet3-compute-onnx``, ``nnet3-xvector-compute-onnx``)
use it. It needs the ``onnx`` package to export and ``onnxruntime`` to run
(the ``onnx`` extra: ``pip install pynnet3[onnx]``); nothing else in pynnet3
does.

    >>> from pynnet3.onnx import export
    >>> export("final.raw", "final.onnx", frames_per_chunk=50)

See docs/onnx.md for the models' inputs, outputs, metadata and state.
"""
from .export import export as export_

__all__ = ["export"]


def export(*args, **kwargs):
    """See :func:`pynnet3.onnx.export.export`."""
    return export_(*args, **kwargs)
