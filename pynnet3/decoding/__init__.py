"""Decoding with nnet3 acoustic models as Kaldi's nnet3-latgen-faster does:
graphs (:mod:`.fst`), acoustic scores (:mod:`.decodable`), the search
(:mod:`.lattice_faster_decoder`), lattices (:mod:`.lattice`,
:mod:`.token_lattice`) and the API (:mod:`.api`: ``pynnet3.decode`` and
``pynnet3.Decoder``).
"""
