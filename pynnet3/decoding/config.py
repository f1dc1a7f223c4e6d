"""Kaldi's LatticeFasterDecoderConfig (decoder/lattice-faster-decoder.h):
the options of the lattice-generating beam search, with Kaldi's defaults and
checks."""

from dataclasses import dataclass, field

from ..errors import UsageError

__all__ = ["LatticeFasterDecoderConfig", "INT32_MAX"]

INT32_MAX = 2**31 - 1


def _opt(default, doc, hidden=False):
    """A field with Kaldi's documentation, as tools register it
    (pynnet3.bin._option_groups.register_options)."""
    return field(default=default, metadata={"doc": doc, "hidden": hidden})


@dataclass(slots=True)
class LatticeFasterDecoderConfig:
    """Search options (Kaldi's names without dashes). ``prune_scale`` is
    Kaldi's internal, unregistered factor: every ``prune_interval`` frames the
    token lists are pruned with delta ``lattice_beam * prune_scale``."""

    beam: float = _opt(16.0, "Decoding beam.  Larger->slower, more accurate.")
    max_active: int = _opt(INT32_MAX, "Decoder max active states.  Larger->slower; more accurate")
    min_active: int = _opt(200, "Decoder minimum #active states.")
    lattice_beam: float = _opt(10.0, "Lattice generation beam.  Larger->slower, and deeper "
                               "lattices")
    prune_interval: int = _opt(25, "Interval (in frames) at which to prune tokens")
    determinize_lattice: bool = _opt(
        True, "If true, determinize the lattice (lattice-determinization, keeping only best "
        "pdf-sequence for each word-sequence).")
    beam_delta: float = _opt(
        0.5, "Increment used in decoding-- this parameter is obscure and relates to a speedup "
        "in the way the max-active constraint is applied.  Larger is more accurate.")
    hash_ratio: float = _opt(2.0, "Setting used in decoder to control hash behavior")
    prune_scale: float = _opt(0.1, "", hidden=True)

    def check(self):
        """Kaldi's Check(): the same conditions, as a UsageError."""
        if not (self.beam > 0.0 and self.max_active > 1 and self.lattice_beam > 0.0
                and self.min_active <= self.max_active and self.prune_interval > 0
                and self.beam_delta > 0.0 and self.hash_ratio >= 1.0
                and 0.0 < self.prune_scale < 1.0):
            raise UsageError(
                "invalid decoder options: need beam > 0, max-active > 1, lattice-beam > 0, "
                "min-active <= max-active, prune-interval > 0, beam-delta > 0 and "
                "hash-ratio >= 1 (got beam=%g max-active=%d min-active=%d lattice-beam=%g "
                "prune-interval=%d beam-delta=%g hash-ratio=%g)" % (
                    self.beam, self.max_active, self.min_active, self.lattice_beam,
                    self.prune_interval, self.beam_delta, self.hash_ratio))
