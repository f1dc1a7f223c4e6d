"""Kaldi's LatticeFasterDecoderConfig (decoder/lattice-faster-decoder.h):
the options of the lattice-generating beam search, with Kaldi's defaults and
checks."""

from dataclasses import dataclass

from ..errors import UsageError

__all__ = ["LatticeFasterDecoderConfig", "INT32_MAX"]

INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class LatticeFasterDecoderConfig:
    """Search options (Kaldi's names without dashes). ``prune_scale`` is
    Kaldi's internal, unregistered factor: every ``prune_interval`` frames the
    token lists are pruned with delta ``lattice_beam * prune_scale``."""

    beam: float = 16.0
    max_active: int = INT32_MAX
    min_active: int = 200
    lattice_beam: float = 10.0
    prune_interval: int = 25
    determinize_lattice: bool = True
    beam_delta: float = 0.5
    hash_ratio: float = 2.0
    prune_scale: float = 0.1

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
