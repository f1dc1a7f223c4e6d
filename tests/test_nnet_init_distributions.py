"""nnet3-init's random initialization follows Kaldi's distributions.

Kaldi's reference models were made by ``nnet3-init --srand=7`` from the
configs beside them, so each of their randomly initialized parameter blocks
is a sample of Kaldi's distribution. Our initialization from the same config
must draw from the same distribution: per block (every float array of a
component with at least 100 elements) the mean and the standard deviation
agree within 5 standard errors of the difference of two samples (about 5%
for 10,000 values). Deterministic blocks (zeros, matrices
from files, constants) must agree exactly in mean and spread.
"""

import numpy as np
import pytest

from conftest import KALDI_REF
from pynnet3.nnet.nnet import Nnet

MIN_ELEMENTS = 100
# Components whose arrays are statistics set after init, not initial values.
STATS_ONLY = {"BatchNormComponent"}


def _model_dirs():
    return sorted(d for d in KALDI_REF.glob("models/*")
                  if (d / "final.config").is_file() and (d / "model.raw").is_file())


def _blocks(component):
    """(name, array) for each float array attribute of a component."""
    names = getattr(component, "__slots__", None) or list(vars(component))
    seen = set()
    for cls in type(component).__mro__:
        names = list(names) + list(getattr(cls, "__slots__", ()))
    for name in names:
        if name in seen or name.startswith("__"):
            continue
        seen.add(name)
        value = getattr(component, name, None)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f" \
                and value.size >= MIN_ELEMENTS:
            yield name, value.astype(np.float64).ravel()


@pytest.mark.parametrize("d", _model_dirs(), ids=lambda d: d.name)
def test_parameter_blocks_follow_kaldis_distributions(d, monkeypatch):
    monkeypatch.chdir(d)  # matrix= paths in final.config are relative
    ours = Nnet.from_config("final.config")
    kaldi = Nnet.read("model.raw")
    checked = 0
    for name, kaldi_comp in zip(kaldi.component_names, kaldi.components):
        if kaldi_comp.type_name in STATS_ONLY:
            continue
        our_comp = ours.components[ours.get_component_index(name)]
        assert our_comp.type_name == kaldi_comp.type_name, name
        kaldi_blocks = dict(_blocks(kaldi_comp))
        for attr, ours_v in _blocks(our_comp):
            if attr not in kaldi_blocks:
                continue
            kaldi_v = kaldi_blocks[attr]
            assert ours_v.shape == kaldi_v.shape, (name, attr)
            mean, std = kaldi_v.mean(), kaldi_v.std()
            where = "%s.%s (%d values)" % (name, attr, kaldi_v.size)
            if std == 0.0:
                assert ours_v.std() == 0.0 and ours_v.mean() == pytest.approx(mean), where
            else:
                # standard errors of a difference of two independent samples
                mean_err = std * np.sqrt(2.0 / kaldi_v.size)
                std_err = std * np.sqrt(1.0 / kaldi_v.size)
                assert abs(ours_v.mean() - mean) <= 5 * mean_err + 1e-7, where
                assert abs(ours_v.std() - std) <= 5 * std_err, where
            checked += 1
    assert checked > 0, "no parameter block large enough to compare"
