"""The reference computation cases the compiler and optimizer tests share:
kaldi-ref's random/caseN and models/zoo*/requestN (when kaldi-ref is present)
and the copies kept in tests/data/compile/."""

from conftest import KALDI_REF, TEST_DATA
from pynnet3.compiler.request import ComputationRequest
from pynnet3.nnet.nnet import Nnet

COMPILE_CASES = (sorted(KALDI_REF.glob("random/case*"), key=lambda p: int(p.name[4:]))
                 + sorted(KALDI_REF.glob("models/zoo*/request*"))
                 + sorted(TEST_DATA.glob("compile/case*")))


def case_id(path):
    """A case's test id: its last two path parts (e.g. random/case17)."""
    return "/".join(path.parts[-2:])


def load_case(case):
    """(network, request) of a case folder."""
    return Nnet.read(str(case / "model.raw")), ComputationRequest.read(str(case / "request.txt"))
