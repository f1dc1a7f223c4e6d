"""Kaldi's BaseFloat in Python: rounding to float32, and printing numbers as
Kaldi's human-readable output does (Info(), nnet3-info).

C++ streams print a float with the stream's precision in "general" format;
a default std::stringstream has precision 6, i.e. ``%.6g``. Booleans in Info()
lines are printed as ``true``/``false``.
"""

from array import array

__all__ = ["f32", "kaldi_str"]

# One float32 slot: storing a Python float in it rounds as C++ does when it
# assigns a double to a float (to nearest even; overflow gives +-inf).
_FLOAT32 = array("f", [0.0])


def f32(value):
    """``value`` rounded to float32 (Kaldi's BaseFloat), as a Python float;
    the same number as ``float(numpy.float32(value))``, faster."""
    _FLOAT32[0] = value
    return _FLOAT32[0]


def kaldi_str(value, precision=6):
    """``value`` as a default C++ ostream prints it (bools as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "%.*g" % (precision, float(value))
