"""--use-gpu for the compute tools, with the semantics of Kaldi's
CuDevice::SelectGpuId.

pynnet3 "is compiled with CUDA" when CuPy is installed: then ``yes`` and
``wait`` need a GPU (no GPU is an error, as in Kaldi), ``optional`` falls back
to the CPU with Kaldi's warning and ``no`` logs that the CPU was chosen.
Without CuPy the option is only checked, as in a Kaldi build without CUDA
(whose nnet3-compute runs on the CPU whatever --use-gpu says, the default
``yes`` included).
"""

import logging

from ..errors import UsageError

logger = logging.getLogger("pynnet3")

__all__ = ["select_backend", "USE_GPU_VALUES"]

USE_GPU_VALUES = ("yes", "no", "optional", "wait")


def _gpu_count(cupy):
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # CUDA runtime present but no usable device/driver
        return 0


def select_backend(use_gpu):
    """The backend name ("numpy" or "cupy") for a --use-gpu value."""
    if use_gpu not in USE_GPU_VALUES:
        raise UsageError("Please choose : --use-gpu=yes|no|optional|wait, passed '%s'"
                         % use_gpu)
    try:
        import cupy
    except ImportError:
        return "numpy"      # a build without CUDA: the option has no effect
    if use_gpu == "no":
        logger.info("Manually selected to compute on CPU.")
        return "numpy"
    if _gpu_count(cupy) == 0:
        if use_gpu == "optional":
            logger.warning("No CUDA GPU detected; running on CPU since --use-gpu=optional "
                           "specified.")
            return "numpy"
        raise UsageError("No CUDA GPU detected!, but --use-gpu=%s" % use_gpu)
    return "cupy"
