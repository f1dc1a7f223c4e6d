"""Decoding with nnet3 acoustic models as Kaldi's nnet3-latgen-faster does:
graphs (:mod:`.fst`), acoustic scores (:mod:`.decodable`), the search
(:mod:`.decoder_fast`, twin :mod:`.decoder_py`), lattices (:mod:`.lattice`,
:mod:`.token_lattice`) and the API (:mod:`.api`).

``pynnet3.decode(model, hclg, feats, **options)`` decodes one utterance
(this package is callable, so the name works whether or not the package was
imported first); :class:`pynnet3.Decoder` loads model and graph once.
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, model, hclg, feats, **options):
        from .api import decode
        return decode(model, hclg, feats, **options)


sys.modules[__name__].__class__ = _CallablePackage
