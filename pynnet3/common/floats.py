"""How Kaldi prints numbers in human-readable output (Info(), nnet3-info).

C++ streams print a float with the stream's precision in "general" format;
a default std::stringstream has precision 6, i.e. ``%.6g``. Booleans in Info()
lines are printed as ``true``/``false``.
"""


def kaldi_str(value, precision=6):
    """``value`` as a default C++ ostream prints it (bools as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return "%.*g" % (precision, float(value))
