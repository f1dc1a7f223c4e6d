"""Kaldi's lattice holders (lat/kaldi-lattice.h): lattices as table objects.

Importing this module makes ``kind="lattice"`` and ``kind="compact_lattice"``
known to every table reader and writer (:func:`pynnet3.io.holders.register_holder`),
as ``pynnet3.components`` registers the component types: a binary lattice is
its FST bytes right after the key (no ``\\0B``); a text one is Kaldi's text
form. Reading accepts either kind and converts it with Kaldi's ConvertLattice,
as Kaldi's holders do.
"""

import struct

from ..errors import KaldiFormatError
from ..io.holders import Holder, register_holder
from .lattice import (FST_MAGIC, LATTICE_ARC_TYPE, CompactLattice, Lattice,
                      read_compact_lattice_binary, read_compact_lattice_text, read_fst_header,
                      read_lattice_text)
from .lattice_ops import convert_compact_lattice, convert_lattice

__all__ = ["LatticeHolder", "read_lattice_either"]


def read_lattice_either(stream, want_compact):
    """A table entry read as Kaldi's lattice holders read it: a Lattice or a
    CompactLattice, binary (by the FST header's arc type) or text (tried as
    the wanted kind first, then as the other), converted to the wanted kind
    with Kaldi's ConvertLattice when it is the other. Advances ``stream.pos``."""
    data, pos = stream.data, stream.pos
    if bytes(data[pos:pos + 4]) == struct.pack("<i", FST_MAGIC):
        arc_type = read_fst_header(data, pos, "archive")[1]
        if arc_type == "compactlattice44":
            value, stream.pos = read_compact_lattice_binary(data, pos, "archive")
        elif arc_type == LATTICE_ARC_TYPE:
            value, stream.pos = Lattice.read_binary(data, pos, "archive")
        else:
            raise KaldiFormatError("FST with arc type %s cannot be converted to %s" % (
                arc_type, "CompactLattice" if want_compact else "Lattice"), "archive", pos)
    else:
        readers = [read_compact_lattice_text, read_lattice_text]
        if not want_compact:
            readers.reverse()
        try:
            value, stream.pos = readers[0](data, pos, "archive")
        except KaldiFormatError as own_error:
            try:
                value, stream.pos = readers[1](data, pos, "archive")
            except KaldiFormatError:
                raise own_error from None
    if want_compact and isinstance(value, Lattice):
        return convert_lattice(value)
    if not want_compact and isinstance(value, CompactLattice):
        return convert_compact_lattice(value)
    return value


class LatticeHolder(Holder):
    """Kaldi's LatticeHolder (kind ``lattice``) or, with ``compact``, its
    CompactLatticeHolder (kind ``compact_lattice``)."""

    __slots__ = ("compact",)

    def __init__(self, compact):
        super().__init__("compact_lattice" if compact else "lattice", None, None,
                         has_header=False)
        self.compact = compact

    def read_object(self, stream):
        return read_lattice_either(stream, want_compact=self.compact)

    def object_bytes(self, value, binary):
        return value.write_binary() if binary else value.write_text()


register_holder(LatticeHolder(compact=False))
register_holder(LatticeHolder(compact=True))
