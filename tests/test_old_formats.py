"""Files written by older Kaldi versions: every older or optional token that
Kaldi's current readers accept must read here too, and writing must give what
current Kaldi writes (its writers always write today's format).

Each case is a small text snippet laid out exactly as the ``Write()`` of the
Kaldi commit named beside it laid it out (from kaldi-asr/kaldi history), the
fields it must read as, and the text current Kaldi writes for it (derived from
today's ``Write()``: same tokens, same derived values). The binary variants are
built from the same token sequence with the binary primitives (binary I/O of
every token and basic type has not changed over these versions), and must give
the binary form of the expected text.

Branches Kaldi's current readers reject (e.g. ``<ValueSum>`` of mid-2015
nonlinearities, ``<DiagonalPowerInOut>`` of Dec 2017, NnetComputation versions
other than 5) are not accepted by Kaldi either; a few are checked to fail here
with a format error rather than a traceback.
"""

import re

import numpy as np
import pytest

from pynnet3.compiler.computation_io import read_computation, write_computation
from pynnet3.components import Component
from pynnet3.errors import KaldiFormatError
from pynnet3.io.stream import InputStream, OutputStream
from pynnet3.model.am import AmNnetSimple
from pynnet3.common.config_line import ConfigLine
from pynnet3.nnet.nnet import Nnet
from pynnet3.hmm.transition import HmmTopology, TransitionModel


# --------------------------------------------------------------------------
# text -> binary with the binary primitives
# --------------------------------------------------------------------------

_VALUE_RE = re.compile(rb"\s*(\[[^\]]*\]|\S+)")


def to_binary(text, kinds):
    """The binary form of a Kaldi text object: ``kinds`` maps a token to the
    kinds of the values written after it ('int', 'float', 'double', 'bool',
    'vector', 'matrix', 'int_vector', 'pair_vector'); tokens not in ``kinds``
    have no value. Kinds of unlisted tokens inside sub-objects are looked up
    the same way."""
    data = text.encode() if isinstance(text, str) else text
    out = OutputStream(binary=True)
    pos = 0
    while True:
        m = _VALUE_RE.match(data, pos)
        if m is None or not m.group(1):
            break
        token = m.group(1).decode()
        pos = m.end()
        out.write_token(token)
        for kind in kinds.get(token, ()):
            m = _VALUE_RE.match(data, pos)
            word = m.group(1)
            pos = m.end()
            if kind == "int":
                out.write_int32(int(word))
            elif kind == "float":
                out.write_float(float(word))
            elif kind == "double":
                out.write_double(float(word))
            elif kind == "bool":
                assert word in (b"T", b"F")
                out.write_bool(word == b"T")
            elif kind == "vector":
                out.write_vector(np.array(word[1:-1].split(), dtype=np.float32))
            elif kind == "matrix":
                rows = [r.split() for r in word[1:-1].split(b"\n") if r.split()]
                out.write_matrix(np.array(rows, dtype=np.float32).reshape(len(rows), -1))
            elif kind == "int_vector":
                out.write_int_vector([int(w) for w in word[1:-1].split()])
            elif kind == "pair_vector":
                out.write_int_pair_vector([tuple(int(x) for x in w.split(b","))
                                           for w in word[1:-1].split()])
            else:
                raise ValueError(kind)
    return out.getvalue()


def read_component(data, binary):
    return Component.read_new(InputStream(data, binary))


def write_component(comp, binary):
    out = OutputStream(binary)
    comp.write_to(out)
    return out.getvalue()


def check_fields(obj, fields):
    for attr, want in fields.items():
        got = getattr(obj, attr)
        if isinstance(want, (list, np.ndarray)) or isinstance(got, np.ndarray):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=attr)
        else:
            assert got == want, (attr, got, want)


# --------------------------------------------------------------------------
# the cases: (id, old text, expected fields, expected current text, kinds)
# --------------------------------------------------------------------------

_COMMON_KINDS = {
    "<LearningRate>": ("float",), "<LearningRateFactor>": ("float",),
    "<IsGradient>": ("bool",), "<MaxChange>": ("float",), "<L2Regularize>": ("float",),
    "<LinearParams>": ("matrix",), "<BiasParams>": ("vector",), "<Params>": ("matrix",),
    "<Dim>": ("int",), "<BlockDim>": ("int",), "<InputDim>": ("int",), "<OutputDim>": ("int",),
    "<ValueAvg>": ("vector",), "<DerivAvg>": ("vector",), "<Count>": ("double",),
    "<OderivRms>": ("vector",), "<OderivCount>": ("double",),
    "<NumDimsSelfRepaired>": ("double",), "<NumDimsProcessed>": ("double",),
    "<SelfRepairLowerThreshold>": ("float",), "<SelfRepairUpperThreshold>": ("float",),
    "<SelfRepairScale>": ("float",),
    "<RankIn>": ("int",), "<RankOut>": ("int",), "<UpdatePeriod>": ("int",),
    "<NumSamplesHistory>": ("float",), "<Alpha>": ("float",),
    "<MaxChangePerSample>": ("float",), "<UpdateCount>": ("double",),
    "<ActiveScalingCount>": ("double",), "<MaxChangeScaleStats>": ("double",),
    "<OrthonormalConstraint>": ("float",),
    "<NumRepeats>": ("int",), "<NumBlocks>": ("int",),
    "<Offsets>": ("vector",), "<UseNaturalGradient>": ("bool",),
    "<Rank>": ("int",), "<MaxChangePerMinibatch>": ("float",),
    "<TargetRms>": ("float",), "<AddLogStddev>": ("bool",),
    "<ClippingThreshold>": ("float",), "<NormBasedClipping>": ("bool",),
    "<SelfRepairClippedProportionThreshold>": ("float",), "<SelfRepairTarget>": ("float",),
    "<NumElementsClipped>": ("int",), "<NumElementsProcessed>": ("int",),
    "<NumSelfRepaired>": ("int",), "<NumBackpropped>": ("int",),
    "<DropoutProportion>": ("float",), "<DropoutPerFrame>": ("bool",),
    "<TestMode>": ("bool",), "<Output>": ("vector",), "<IsUpdatable>": ("bool",),
    "<MaxRowsProcess>": ("int",), "<NumComponents>": ("int",),
    "<BackpropScale>": ("float",), "<Sizes>": ("int_vector",),
    "<TimeOffsets>": ("int_vector",), "<AlphaInOut>": ("float", "float"),
    "<RankInOut>": ("int", "int"),
}


def _kinds(**extra):
    kinds = dict(_COMMON_KINDS)
    kinds.update({"<%s>" % k: v for k, v in extra.items()})
    return kinds


_ONE_BY_TWO = "[\n  0.5 -0.25 ]\n"       # a 1 x 2 matrix as Kaldi writes it
_TWO_BY_TWO = "[\n  0.5 -0.25 \n  1 2 ]\n"

CASES = []


def case(id, commit, old, fields, new, kinds=None, binary=True):
    CASES.append(pytest.param(old, fields, new, kinds or _COMMON_KINDS, binary,
                              id=id, marks=()))


# -- UpdatableComponent common header and the affine family ------------------

# 7eaa57f36 (2015-08-11) .. b90e04d10 (2016-01-02): no WriteUpdatableCommon yet;
# <IsGradient> written after the parameters.
case("AffineComponent/2015", "7eaa57f36",
     "<AffineComponent> <LearningRate> 0.001 <LinearParams>  " + _TWO_BY_TWO
     + "<BiasParams>  [ 0.125 -1 ]\n<IsGradient> F </AffineComponent> ",
     dict(learning_rate=np.float32(0.001), is_gradient=False, learning_rate_factor=1.0,
          max_change=0.0, orthonormal_constraint=0.0,
          linear_params=[[0.5, -0.25], [1, 2]], bias_params=[0.125, -1]),
     "<AffineComponent> <LearningRate> 0.001 <LinearParams>  " + _TWO_BY_TWO
     + "<BiasParams>  [ 0.125 -1 ]\n</AffineComponent> ")

# 6d66e728f (2016-10-26) .. 9e37c5178 (2017-10-16): WriteUpdatableCommon with
# <LearningRateFactor>/<IsGradient>/<MaxChange>, and the old <IsGradient> after
# the parameters (here a gradient: T in both places).
case("AffineComponent/2016-gradient", "6d66e728f",
     "<AffineComponent> <LearningRateFactor> 0.5 <IsGradient> T <MaxChange> 0.75 "
     "<LearningRate> 1 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n<IsGradient> T </AffineComponent> ",
     dict(learning_rate=1.0, is_gradient=True, learning_rate_factor=0.5, max_change=0.75,
          l2_regularize=0.0),
     "<AffineComponent> <LearningRateFactor> 0.5 <IsGradient> T <MaxChange> 0.75 "
     "<LearningRate> 1 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n</AffineComponent> ")

# f89ffeb6b (2017-10-22) .. db2865034 (2017-11-23): <L2Regularize> in the header,
# still the trailing <IsGradient>.
case("AffineComponent/2017-l2", "f89ffeb6b",
     "<AffineComponent> <L2Regularize> 0.0025 <LearningRate> 0.002 <LinearParams>  "
     + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n<IsGradient> F </AffineComponent> ",
     dict(l2_regularize=np.float32(0.0025), learning_rate=np.float32(0.002),
          is_gradient=False),
     "<AffineComponent> <L2Regularize> 0.0025 <LearningRate> 0.002 <LinearParams>  "
     + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n</AffineComponent> ")

_NG_TAIL_NEW = ("<RankIn> 20 <RankOut> 80 <UpdatePeriod> 4 <NumSamplesHistory> 2000 "
                "<Alpha> 4 </NaturalGradientAffineComponent> ")
_NG_FIELDS = dict(rank_in=20, rank_out=80, update_period=4, num_samples_history=2000.0,
                  alpha=4.0, orthonormal_constraint=0.0, is_gradient=False)

# 7eaa57f36 (2015-08-11) .. d5da93123 (2015-09-16): fixed tags, <MaxChangePerSample>
# and <IsGradient> at the end, and the "closing" tag written without its slash.
case("NaturalGradientAffineComponent/2015-08", "7eaa57f36",
     "<NaturalGradientAffineComponent> <LearningRate> 0.0015 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n<RankIn> 20 <RankOut> 80 <UpdatePeriod> 4 "
     "<NumSamplesHistory> 2000 <Alpha> 4 <MaxChangePerSample> 0.075 <IsGradient> F "
     "<NaturalGradientAffineComponent> ",
     dict(_NG_FIELDS, learning_rate=np.float32(0.0015)),
     "<NaturalGradientAffineComponent> <LearningRate> 0.0015 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n" + _NG_TAIL_NEW)

# dc2896795 (2015-09-21) .. 28db5f150 (2015-12-03): also <UpdateCount>,
# <ActiveScalingCount>, <MaxChangeScaleStats> (doubles), slashless closing tag.
case("NaturalGradientAffineComponent/2015-09", "dc2896795",
     "<NaturalGradientAffineComponent> <LearningRate> 0.0015 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n<RankIn> 20 <RankOut> 80 <UpdatePeriod> 4 "
     "<NumSamplesHistory> 2000 <Alpha> 4 <MaxChangePerSample> 0.075 <IsGradient> F "
     "<UpdateCount> 1234 <ActiveScalingCount> 12 <MaxChangeScaleStats> 3.5 "
     "<NaturalGradientAffineComponent> ",
     dict(_NG_FIELDS, learning_rate=np.float32(0.0015)),
     "<NaturalGradientAffineComponent> <LearningRate> 0.0015 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n" + _NG_TAIL_NEW)

# d33581c5f (2016-01-03) .. 9c9adbe35 (2017-04-01): WriteUpdatableCommon, the same
# old tail, proper closing tag.
case("NaturalGradientAffineComponent/2016", "d33581c5f",
     "<NaturalGradientAffineComponent> <LearningRateFactor> 0.25 <LearningRate> 0.0015 "
     "<LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n<RankIn> 10 <RankOut> 40 <UpdatePeriod> 4 "
     "<NumSamplesHistory> 2000 <Alpha> 4 <MaxChangePerSample> 0.075 <IsGradient> F "
     "<UpdateCount> 0 <ActiveScalingCount> 0 <MaxChangeScaleStats> 0 "
     "</NaturalGradientAffineComponent> ",
     dict(_NG_FIELDS, learning_rate_factor=0.25, rank_in=10, rank_out=40),
     "<NaturalGradientAffineComponent> <LearningRateFactor> 0.25 <LearningRate> 0.0015 "
     "<LinearParams>  " + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n"
     "<RankIn> 10 <RankOut> 40 <UpdatePeriod> 4 <NumSamplesHistory> 2000 "
     "<Alpha> 4 </NaturalGradientAffineComponent> ")

# 2fdf739b7 (2017-04-21) .. e5a48fc0e (2017-08-25): <MaxChange> in the header,
# only <IsGradient> left of the old tail.
case("NaturalGradientAffineComponent/2017", "2fdf739b7",
     "<NaturalGradientAffineComponent> <MaxChange> 1.5 <LearningRate> 0.0015 "
     "<LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n<RankIn> 20 <RankOut> 80 <UpdatePeriod> 4 "
     "<NumSamplesHistory> 2000 <Alpha> 4 <IsGradient> F </NaturalGradientAffineComponent> ",
     dict(_NG_FIELDS, max_change=1.5),
     "<NaturalGradientAffineComponent> <MaxChange> 1.5 <LearningRate> 0.0015 "
     "<LinearParams>  " + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n" + _NG_TAIL_NEW)

# 0a931a135 (2016-01-04) .. db2865034 (2017-11-23): trailing <IsGradient>.
for _type in ("RepeatedAffineComponent", "NaturalGradientRepeatedAffineComponent"):
    case(_type + "/2016", "0a931a135",
         "<%s> <LearningRate> 0.001 <NumRepeats> 2 <LinearParams>  " % _type + _ONE_BY_TWO
         + "<BiasParams>  [ 3 ]\n<IsGradient> F </%s> " % _type,
         dict(num_repeats=2, is_gradient=False, bias_params=[3]),
         "<%s> <LearningRate> 0.001 <NumRepeats> 2 <LinearParams>  " % _type + _ONE_BY_TWO
         + "<BiasParams>  [ 3 ]\n</%s> " % _type)

# cce4b50ca (2015-12-29) .. b90e04d10 (2016-01-02): fixed tag, <LearningRate>
# first, trailing <IsGradient>.
case("BlockAffineComponent/2015", "cce4b50ca",
     "<BlockAffineComponent> <LearningRate> 0.001 <NumBlocks> 1 <LinearParams>  "
     + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n<IsGradient> F </BlockAffineComponent> ",
     dict(num_blocks=1, is_gradient=False),
     "<BlockAffineComponent> <LearningRate> 0.001 <NumBlocks> 1 <LinearParams>  "
     + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n</BlockAffineComponent> ")

# 7eaa57f36 (2015-08-11) .. db2865034 (2017-11-23): trailing <IsGradient>
# (a vector <Params>).
case("PerElementScaleComponent/2015", "7eaa57f36",
     "<PerElementScaleComponent> <LearningRate> 0.001 <Params>  [ 1 0.5 ]\n"
     "<IsGradient> F </PerElementScaleComponent> ",
     dict(scales=[1, 0.5], is_gradient=False),
     "<PerElementScaleComponent> <LearningRate> 0.001 <Params>  [ 1 0.5 ]\n"
     "</PerElementScaleComponent> ",
     _kinds(Params=("vector",)))

# 9c53e317a (2015-11-01) .. db2865034 (2017-11-23): no <Dim>/<UseNaturalGradient>
# (then dim is the offsets' dimension and natural gradient is on).
case("PerElementOffsetComponent/2015", "9c53e317a",
     "<PerElementOffsetComponent> <LearningRate> 0.001 <Offsets>  [ 0.5 -2 1 ]\n"
     "<IsGradient> F </PerElementOffsetComponent> ",
     dict(offsets=[0.5, -2, 1], dim=3, use_natural_gradient=True, is_gradient=False),
     "<PerElementOffsetComponent> <LearningRate> 0.001 <Offsets>  [ 0.5 -2 1 ]\n"
     "<Dim> 3 <UseNaturalGradient> T </PerElementOffsetComponent> ")

# 7eaa57f36 (2015-08-11) .. b90e04d10 (2016-01-02) and d8be99a1c (2017-04-21):
# <MaxChangePerMinibatch> after <Alpha> (dropped; now the max-change option).
case("NaturalGradientPerElementScaleComponent/2015", "7eaa57f36",
     "<NaturalGradientPerElementScaleComponent> <LearningRate> 0.001 <Params>  [ 1 1 ]\n"
     "<IsGradient> F <Rank> 8 <UpdatePeriod> 10 <NumSamplesHistory> 2000 <Alpha> 4 "
     "<MaxChangePerMinibatch> 0 </NaturalGradientPerElementScaleComponent> ",
     dict(scales=[1, 1], rank=8, update_period=10, alpha=4.0, max_change=0.0),
     "<NaturalGradientPerElementScaleComponent> <LearningRate> 0.001 <Params>  [ 1 1 ]\n"
     "<IsGradient> F <Rank> 8 <UpdatePeriod> 10 <NumSamplesHistory> 2000 <Alpha> 4 "
     "</NaturalGradientPerElementScaleComponent> ",
     _kinds(Params=("vector",)))

# 6ad7a1087 (2016-02-06) .. bdc8eebb1 (2016-03-06): no learning rate at all
# (Kaldi then keeps its default, 0.001).
case("ConstantFunctionComponent/2016-02", "6ad7a1087",
     "<ConstantFunctionComponent> <InputDim> 3 <Output>  [ 1 2 ]\n<IsUpdatable> T "
     "<UseNaturalGradient> T </ConstantFunctionComponent> ",
     dict(input_dim_=3, output=[1, 2], is_updatable=True, use_natural_gradient=True,
          learning_rate=0.001),
     "<ConstantFunctionComponent> <LearningRate> 0.001 <InputDim> 3 <Output>  [ 1 2 ]\n"
     "<IsUpdatable> T <UseNaturalGradient> T </ConstantFunctionComponent> ")

# 04a564510 (2017-03-21) .. 2fdf739b7 (2017-04-21): no learning rate.
_CONV_MODEL = ("<ConvolutionModel> <NumFiltersIn> 1 <NumFiltersOut> 2 <HeightIn> 2 "
               "<HeightOut> 2 <HeightSubsampleOut> 1 <Offsets> [ 0,0 ]\n"
               "<RequiredTimeOffsets> [ 0 ]\n</ConvolutionModel> ")
_CONV_TAIL = ("<LinearParams>  [\n  0.5 \n  -1 ]\n<BiasParams>  [ 0.25 0 ]\n"
              "<MaxMemoryMb> 200 <UseNaturalGradient> T <NumMinibatchesHistory> 4 "
              "<AlphaInOut> 4 4 <RankInOut> 20 80 </TimeHeightConvolutionComponent> ")
_CONV_KINDS = _kinds(NumFiltersIn=("int",), NumFiltersOut=("int",), HeightIn=("int",),
                     HeightOut=("int",), HeightSubsampleOut=("int",),
                     Offsets=("pair_vector",), RequiredTimeOffsets=("int_vector",),
                     MaxMemoryMb=("float",), NumMinibatchesHistory=("float",))
case("TimeHeightConvolutionComponent/2017-03", "04a564510",
     "<TimeHeightConvolutionComponent> <Model> " + _CONV_MODEL + _CONV_TAIL,
     dict(learning_rate=0.001, max_memory_mb=200.0, use_natural_gradient=True,
          num_minibatches_history=4.0, alpha_in=4.0, alpha_out=4.0, rank_in=20, rank_out=80,
          bias_params=[0.25, 0]),
     "<TimeHeightConvolutionComponent> <LearningRate> 0.001 <Model> " + _CONV_MODEL
     + _CONV_TAIL, _CONV_KINDS)

# ConvolutionModel::Read takes the model without its <ConvolutionModel> tag
# (ExpectOneOrTwoTokens; every Write wrote the tag) and keeps the required time
# offsets in a set (written sorted, once each).
case("TimeHeightConvolutionComponent/model-untagged", "reader branch",
     "<TimeHeightConvolutionComponent> <LearningRate> 0.001 <Model> "
     + _CONV_MODEL[len("<ConvolutionModel> "):].replace("[ 0 ]", "[ 0 0 ]") + _CONV_TAIL,
     dict(learning_rate=np.float32(0.001)),
     "<TimeHeightConvolutionComponent> <LearningRate> 0.001 <Model> " + _CONV_MODEL
     + _CONV_TAIL, _CONV_KINDS)

# TdnnComponent::Read also takes a single <Alpha> (for alpha-in and alpha-out): a
# pre-release TDNN-F format (per the comment in Kaldi's reader; no commit in
# kaldi-asr/kaldi wrote it, Write() has only ever written <AlphaInOut>).
case("TdnnComponent/alpha", "pre-release (reader branch)",
     "<TdnnComponent> <MaxChange> 0.75 <LearningRate> 0.001 <TimeOffsets> [ -1 0 ]\n"
     "<LinearParams>  [\n  1 2 ]\n<BiasParams>  [ 0.5 ]\n<OrthonormalConstraint> 0 "
     "<UseNaturalGradient> T <NumSamplesHistory> 2000 <Alpha> 4 <RankInOut> 20 80 "
     "</TdnnComponent> ",
     dict(time_offsets=[-1, 0], alpha_in=4.0, alpha_out=4.0, rank_in=20, rank_out=80),
     "<TdnnComponent> <MaxChange> 0.75 <LearningRate> 0.001 <TimeOffsets> [ -1 0 ]\n"
     "<LinearParams>  [\n  1 2 ]\n<BiasParams>  [ 0.5 ]\n<OrthonormalConstraint> 0 "
     "<UseNaturalGradient> T <NumSamplesHistory> 2000 <AlphaInOut> 4 4 <RankInOut> 20 80 "
     "</TdnnComponent> ")

# ce7a32464 (2016-11-25) .. a39df469f (2017-04-13): no <UseDropout>.
_LSTM_BODY = ("<Params>  [\n  0.5 \n  -1 \n  0.25 ]\n<ValueAvg>  [\n  0 \n  0 \n  0 \n  0 \n"
              "  0 ]\n<DerivAvg>  [\n  0 \n  0 \n  0 \n  0 \n  0 ]\n"
              "<SelfRepairConfig>  [ 0.05 0.05 0.2 0.05 0.2 1e-05 1e-05 1e-05 1e-05 1e-05 ]\n"
              "<SelfRepairProb>  [ 0 0 0 0 0 ]\n")
_LSTM_KINDS = _kinds(ValueAvg=("matrix",), DerivAvg=("matrix",),
                     SelfRepairConfig=("vector",), SelfRepairProb=("vector",),
                     UseDropout=("bool",))
case("LstmNonlinearityComponent/2016", "55905859e",
     "<LstmNonlinearityComponent> <LearningRate> 0.001 " + _LSTM_BODY
     + "<Count> 0 </LstmNonlinearityComponent> ",
     dict(use_dropout=False),
     "<LstmNonlinearityComponent> <LearningRate> 0.001 " + _LSTM_BODY
     + "<Count> 0 </LstmNonlinearityComponent> ", _LSTM_KINDS)

# d8be99a1c (2017-04-21) on: <UseDropout> only when true, before <Count>.
case("LstmNonlinearityComponent/2017-dropout", "d8be99a1c",
     "<LstmNonlinearityComponent> <MaxChange> 0.75 <LearningRate> 0.001 " + _LSTM_BODY
     + "<UseDropout> T <Count> 0 </LstmNonlinearityComponent> ",
     dict(use_dropout=True, max_change=0.75),
     "<LstmNonlinearityComponent> <MaxChange> 0.75 <LearningRate> 0.001 " + _LSTM_BODY
     + "<UseDropout> T <Count> 0 </LstmNonlinearityComponent> ", _LSTM_KINDS)

# ConvolutionComponent::Read takes the closing tag straight after <BiasParams>
# (no <IsGradient>; no Kaldi commit wrote that, but the reader branch exists);
# today's Write always writes <IsGradient>.
_OLD_CONV = ("<LearningRate> 0.001 <InputXDim> 1 <InputYDim> 2 <InputZDim> 1 "
             "<FiltXDim> 1 <FiltYDim> 1 <FiltXStep> 1 <FiltYStep> 1 <InputVectorization> 0 "
             "<FilterParams>  [\n  0.5 ]\n<BiasParams>  [ 0.25 ]\n")
_OLD_CONV_KINDS = _kinds(InputXDim=("int",), InputYDim=("int",), InputZDim=("int",),
                         FiltXDim=("int",), FiltYDim=("int",), FiltXStep=("int",),
                         FiltYStep=("int",), InputVectorization=("int",),
                         FilterParams=("matrix",))
case("ConvolutionComponent/no-is-gradient", "reader branch",
     "<ConvolutionComponent> " + _OLD_CONV + "</ConvolutionComponent> ",
     dict(is_gradient=False),
     "<ConvolutionComponent> " + _OLD_CONV + "<IsGradient> F </ConvolutionComponent> ",
     _OLD_CONV_KINDS)

# 7ad359800 (2015-12-26) .. b90e04d10 (2016-01-02): no learning rate; its
# sub-components in the formats of their time (a 2015 BlockAffineComponent with
# trailing <IsGradient>, a 2015 RectifiedLinearComponent without diagnostics).
case("CompositeComponent/2015", "7ad359800",
     "<CompositeComponent> <MaxRowsProcess> 2048 <NumComponents> 2 "
     "<BlockAffineComponent> <LearningRate> 0.001 <NumBlocks> 1 <LinearParams>  "
     + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n<IsGradient> F </BlockAffineComponent> "
     "<RectifiedLinearComponent> <Dim> 1 <ValueAvg>  [ 0.5 ]\n<DerivAvg>  [ 1 ]\n"
     "<Count> 4 </RectifiedLinearComponent> </CompositeComponent> ",
     dict(learning_rate=0.001, max_rows_process=2048),
     "<CompositeComponent> <LearningRate> 0.001 <MaxRowsProcess> 2048 <NumComponents> 2 "
     "<BlockAffineComponent> <LearningRate> 0.001 <NumBlocks> 1 <LinearParams>  "
     + _ONE_BY_TWO + "<BiasParams>  [ 3 ]\n</BlockAffineComponent> "
     "<RectifiedLinearComponent> <Dim> 1 <ValueAvg>  [ 0.5 ]\n<DerivAvg>  [ 1 ]\n"
     "<Count> 4 <OderivRms>  [ ]\n<OderivCount> 0 <NumDimsSelfRepaired> 0 "
     "<NumDimsProcessed> 0 </RectifiedLinearComponent> </CompositeComponent> ")


# -- NonlinearComponent and its former subclasses ---------------------------------

_NL_NEW_TAIL = "<OderivRms>  [ ]\n<OderivCount> 0 <NumDimsSelfRepaired> 0 <NumDimsProcessed> 0 "

# b53fad02f (2015-08-21) .. c6c0f34a8 (2016-02-10): averages and count only.
case("SigmoidComponent/2015", "b53fad02f",
     "<SigmoidComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n<DerivAvg>  [ 0.125 0.75 ]\n"
     "<Count> 4 </SigmoidComponent> ",
     dict(dim=2, block_dim=2, count=4.0, value_sum=[2, 1], deriv_sum=[0.5, 3],
          oderiv_count=0.0, num_dims_self_repaired=0.0, num_dims_processed=0.0,
          self_repair_scale=0.0),
     "<SigmoidComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n<DerivAvg>  [ 0.125 0.75 ]\n"
     "<Count> 4 " + _NL_NEW_TAIL + "</SigmoidComponent> ")

# 760a4004f (2016-02-09) .. 6d66e728f (2016-10-26): self-repair settings, no
# <NumDimsSelfRepaired>/<NumDimsProcessed>.
case("RectifiedLinearComponent/2016-02", "760a4004f",
     "<RectifiedLinearComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n"
     "<DerivAvg>  [ 0.125 0.75 ]\n<Count> 4 <SelfRepairLowerThreshold> 0.05 "
     "<SelfRepairUpperThreshold> 0.95 <SelfRepairScale> 1e-05 </RectifiedLinearComponent> ",
     dict(self_repair_lower_threshold=np.float32(0.05),
          self_repair_upper_threshold=np.float32(0.95), self_repair_scale=np.float32(1e-5)),
     "<RectifiedLinearComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n"
     "<DerivAvg>  [ 0.125 0.75 ]\n<Count> 4 " + _NL_NEW_TAIL
     + "<SelfRepairLowerThreshold> 0.05 <SelfRepairUpperThreshold> 0.95 "
     "<SelfRepairScale> 1e-05 </RectifiedLinearComponent> ")

# 3fe38c82f (2016-10-27) .. db2865034 (2017-11-23): <NumDimsSelfRepaired>,
# <NumDimsProcessed>; no output-derivative stats.
case("TanhComponent/2016-10", "3fe38c82f",
     "<TanhComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n<DerivAvg>  [ 0.125 0.75 ]\n"
     "<Count> 4 <NumDimsSelfRepaired> 3 <NumDimsProcessed> 8 <SelfRepairScale> 1e-05 "
     "</TanhComponent> ",
     dict(num_dims_self_repaired=3.0, num_dims_processed=8.0,
          self_repair_lower_threshold=np.float32(-1000)),
     "<TanhComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n<DerivAvg>  [ 0.125 0.75 ]\n"
     "<Count> 4 <OderivRms>  [ ]\n<OderivCount> 0 <NumDimsSelfRepaired> 3 "
     "<NumDimsProcessed> 8 <SelfRepairScale> 1e-05 </TanhComponent> ")

# 6d6e7a908 (2017-11-27) .. 9ac5dd4ef (2017-12-31): <BlockDim> when it differs.
case("SoftmaxComponent/2017-11", "6d6e7a908",
     "<SoftmaxComponent> <Dim> 4 <BlockDim> 2 <ValueAvg>  [ ]\n<DerivAvg>  [ ]\n"
     "<Count> 0 <NumDimsSelfRepaired> 0 <NumDimsProcessed> 0 </SoftmaxComponent> ",
     dict(dim=4, block_dim=2, count=0.0),
     "<SoftmaxComponent> <Dim> 4 <BlockDim> 2 <ValueAvg>  [ ]\n<DerivAvg>  [ ]\n"
     "<Count> 0 " + _NL_NEW_TAIL + "</SoftmaxComponent> ")

# Until eacf34a85 (2018-07-07) NoOpComponent was a NonlinearComponent and wrote
# its (unused) statistics; here as 9f362a045 (2018-01-04) .. wrote them.
case("NoOpComponent/2018-01", "9f362a045",
     "<NoOpComponent> <Dim> 3 <ValueAvg>  [ 0 0 0 ]\n<DerivAvg>  [ 1 1 1 ]\n<Count> 2 "
     "<OderivRms>  [ 0 0 0 ]\n<OderivCount> 2 <NumDimsSelfRepaired> 0 "
     "<NumDimsProcessed> 0 </NoOpComponent> ",
     dict(dim=3, backprop_scale=1.0),
     "<NoOpComponent> <Dim> 3 <BackpropScale> 1 </NoOpComponent> ")
# ... and as 3fe38c82f (2016-10-27) .. db2865034 (2017-11-23) wrote them.
case("NoOpComponent/2016-10", "3fe38c82f",
     "<NoOpComponent> <Dim> 2 <ValueAvg>  [ ]\n<DerivAvg>  [ ]\n<Count> 0 "
     "<NumDimsSelfRepaired> 0 <NumDimsProcessed> 0 </NoOpComponent> ",
     dict(dim=2, backprop_scale=1.0),
     "<NoOpComponent> <Dim> 2 <BackpropScale> 1 </NoOpComponent> ")


# -- NormalizeComponent ----------------------------------------------------------

# 568bf06ab (2015-11-18) .. a0cd50818 (2016-02-03): <Dim>, statistics.
case("NormalizeComponent/2015", "568bf06ab",
     "<NormalizeComponent> <Dim> 4 <TargetRms> 1 <ValueAvg>  [ 0 0 0 0 ]\n"
     "<DerivAvg>  [ 1 1 1 1 ]\n<Count> 8 </NormalizeComponent> ",
     dict(dim=4, block_dim=4, target_rms=1.0, add_log_stddev=False),
     "<NormalizeComponent> <InputDim> 4 <TargetRms> 1 <AddLogStddev> F "
     "</NormalizeComponent> ")
# a0cd50818 (2016-02-03) .. ea0cbdcc0 (2016-02-06): <AddLogStddev>, statistics.
case("NormalizeComponent/2016-02", "a0cd50818",
     "<NormalizeComponent> <Dim> 4 <TargetRms> 0.5 <AddLogStddev> T "
     "<ValueAvg>  [ 0 0 0 0 ]\n<DerivAvg>  [ 1 1 1 1 ]\n<Count> 8 </NormalizeComponent> ",
     dict(dim=4, target_rms=0.5, add_log_stddev=True),
     "<NormalizeComponent> <InputDim> 4 <TargetRms> 0.5 <AddLogStddev> T "
     "</NormalizeComponent> ")


# -- other simple components -------------------------------------------------------

# cbe1b9294 (2015-09-01) .. 69ccd5cef (2016-06-25): no self-repair settings or counts.
case("ClipGradientComponent/2015", "cbe1b9294",
     "<ClipGradientComponent> <Dim> 3 <ClippingThreshold> 15 <NormBasedClipping> T "
     "<NumElementsClipped> 7 <NumElementsProcessed> 100 </ClipGradientComponent> ",
     dict(dim=3, clipping_threshold=15.0, norm_based_clipping=True, num_clipped=7, count=100,
          self_repair_clipped_proportion_threshold=1.0, self_repair_target=0.0,
          self_repair_scale=0.0, num_self_repaired=0, num_backpropped=0),
     "<ClipGradientComponent> <Dim> 3 <ClippingThreshold> 15 <NormBasedClipping> T "
     "<SelfRepairClippedProportionThreshold> 1 <SelfRepairTarget> 0 <SelfRepairScale> 0 "
     "<NumElementsClipped> 7 <NumElementsProcessed> 100 <NumSelfRepaired> 0 "
     "<NumBackpropped> 0 </ClipGradientComponent> ")

# 4b5eed2f0 (2016-10-03) .. 5aee23492 (2017-01-22): no per-frame, no test mode.
case("DropoutComponent/2016", "4b5eed2f0",
     "<DropoutComponent> <Dim> 5 <DropoutProportion> 0.5 </DropoutComponent> ",
     dict(dim=5, dropout_proportion=0.5, dropout_per_frame=False, test_mode=False),
     "<DropoutComponent> <Dim> 5 <DropoutProportion> 0.5 <DropoutPerFrame> F "
     "<TestMode> F </DropoutComponent> ")
# 9208165a5 (2017-01-25) .. 60d5f87ae (2017-04-24): per-frame, no test mode.
case("DropoutComponent/2017", "9208165a5",
     "<DropoutComponent> <Dim> 5 <DropoutProportion> 0.25 <DropoutPerFrame> T "
     "</DropoutComponent> ",
     dict(dropout_per_frame=True, test_mode=False),
     "<DropoutComponent> <Dim> 5 <DropoutProportion> 0.25 <DropoutPerFrame> T "
     "<TestMode> F </DropoutComponent> ")

# d8be99a1c (2017-04-21) .. 60d5f87ae (2017-04-24): no test mode;
# 4fd7f005b (2017-04-25) .. b61d76049 (2018-02-20): no <Continuous>.
case("DropoutMaskComponent/2017-04-21", "d8be99a1c",
     "<DropoutMaskComponent> <OutputDim> 3 <DropoutProportion> 0.5 "
     "</DropoutMaskComponent> ",
     dict(test_mode=False, continuous=False),
     "<DropoutMaskComponent> <OutputDim> 3 <DropoutProportion> 0.5 <TestMode> F "
     "</DropoutMaskComponent> ")
case("DropoutMaskComponent/2017-04-25", "4fd7f005b",
     "<DropoutMaskComponent> <OutputDim> 3 <DropoutProportion> 0.5 <TestMode> T "
     "</DropoutMaskComponent> ",
     dict(test_mode=True, continuous=False),
     "<DropoutMaskComponent> <OutputDim> 3 <DropoutProportion> 0.5 <TestMode> T "
     "</DropoutMaskComponent> ")

# 9a4ba5ec0 (2018-02-28) .. f53556ecc (2019-07-04): no SpecAugment settings.
case("GeneralDropoutComponent/2018", "9a4ba5ec0",
     "<GeneralDropoutComponent> <Dim> 4 <BlockDim> 2 <TimePeriod> 0 "
     "<DropoutProportion> 0.5 <TestMode> <Continuous> </GeneralDropoutComponent> ",
     dict(dim=4, block_dim=2, time_period=0, specaugment_max_proportion=0.0,
          specaugment_max_regions=1, test_mode=True, continuous=True),
     "<GeneralDropoutComponent> <Dim> 4 <BlockDim> 2 <TimePeriod> 0 "
     "<DropoutProportion> 0.5 <TestMode> <Continuous> </GeneralDropoutComponent> ",
     _kinds(TimePeriod=("int",), TestMode=()))
# 1badfd9d6 (2019-07-08): <SpecAugmentMaxProportion> without <SpecAugmentMaxRegions>
# (the default, 1, is not written).
case("GeneralDropoutComponent/2019", "1badfd9d6",
     "<GeneralDropoutComponent> <Dim> 4 <BlockDim> 4 <TimePeriod> 0 "
     "<DropoutProportion> 0 <SpecAugmentMaxProportion> 0.25 </GeneralDropoutComponent> ",
     dict(specaugment_max_proportion=0.25, specaugment_max_regions=1, test_mode=False),
     "<GeneralDropoutComponent> <Dim> 4 <BlockDim> 4 <TimePeriod> 0 "
     "<DropoutProportion> 0 <SpecAugmentMaxProportion> 0.25 </GeneralDropoutComponent> ",
     _kinds(TimePeriod=("int",), TestMode=(), SpecAugmentMaxProportion=("float",)))

# 463ef75ee (2016-11-13) .. b34e19277 (2017-01-03): no <Scale>.
case("BackpropTruncationComponent/2016", "463ef75ee",
     "<BackpropTruncationComponent> <Dim> 2 <ClippingThreshold> 30 "
     "<ZeroingThreshold> 15 <ZeroingInterval> 20 <RecurrenceInterval> 1 "
     "<NumElementsClipped> 0 <NumElementsZeroed> 0 <NumElementsProcessed> 0 "
     "<NumZeroingBoundaries> 0 </BackpropTruncationComponent> ",
     dict(dim=2, scale_value=1.0),
     "<BackpropTruncationComponent> <Dim> 2 <Scale> 1 <ClippingThreshold> 30 "
     "<ZeroingThreshold> 15 <ZeroingInterval> 20 <RecurrenceInterval> 1 "
     "<NumElementsClipped> 0 <NumElementsZeroed> 0 <NumElementsProcessed> 0 "
     "<NumZeroingBoundaries> 0 </BackpropTruncationComponent> ",
     _kinds(Scale=("float",), ZeroingThreshold=("float",), ZeroingInterval=("int",),
            RecurrenceInterval=("int",), NumElementsClipped=("double",),
            NumElementsZeroed=("double",), NumElementsProcessed=("double",),
            NumZeroingBoundaries=("double",)))

# SumGroupComponent::Read takes <SumGroupComponent> in place of the closing tag
# (a reader branch; every Write in the history wrote </SumGroupComponent>).
case("SumGroupComponent/open-tag-close", "reader branch",
     "<SumGroupComponent> <Sizes> [ 2 1 ]\n<SumGroupComponent> ",
     dict(sizes=[2, 1]),
     "<SumGroupComponent> <Sizes> [ 2 1 ]\n</SumGroupComponent> ")


@pytest.mark.parametrize("old, fields, new, kinds, binary", CASES)
def test_old_component_text(old, fields, new, kinds, binary):
    comp = read_component(old.encode(), binary=False)
    check_fields(comp, fields)
    assert write_component(comp, binary=False).decode() == new
    # reading what we wrote gives it back unchanged (today's format), and the
    # same state: the same Info() and parameters
    again = read_component(new.encode(), binary=False)
    assert write_component(again, binary=False).decode() == new
    assert again.info() == comp.info()
    np.testing.assert_array_equal(again.vectorize(), comp.vectorize())


@pytest.mark.parametrize("old, fields, new, kinds, binary", CASES)
def test_old_component_binary(old, fields, new, kinds, binary):
    comp = read_component(to_binary(old, kinds), binary=True)
    check_fields(comp, fields)
    assert write_component(comp, binary=True) == to_binary(new, kinds)


# --------------------------------------------------------------------------
# whole networks
# --------------------------------------------------------------------------

def _nnet_text(config, components):
    """An nnet3 text file laid out as Nnet::Write has always laid it out."""
    body = "".join("<ComponentName> %s %s\n" % (name, text) for name, text in components)
    return ("<Nnet3> \n%s\n<NumComponents> %d \n%s</Nnet3> "
            % (config, len(components), body))


# An nnet3 network as Kaldi wrote it between e527fb438 (2015-08-02, output-node
# objective=...) .. and 6d66e728f (2016-10-26): a 2016 natural-gradient affine
# (<MaxChangePerSample>, <IsGradient>, <UpdateCount>...), a ReLU with
# self-repair settings and no diagnostics counters, a 2015 NormalizeComponent
# with statistics and a log-softmax.
_OLD_2016_CONFIG = (
    "input-node name=input dim=2\n"
    "component-node name=affine1 component=affine1 input=Append(Offset(input, -1), input)\n"
    "component-node name=relu1 component=relu1 input=affine1\n"
    "component-node name=norm1 component=norm1 input=relu1\n"
    "component-node name=final component=final input=norm1\n"
    "output-node name=output input=final objective=linear\n")
_OLD_2016_COMPONENTS = [
    ("affine1", "<NaturalGradientAffineComponent> <LearningRate> 0.001 <LinearParams>  [\n"
     "  0.5 -0.25 1 2 \n  0 1 0 -1 ]\n<BiasParams>  [ 0.125 -1 ]\n<RankIn> 2 <RankOut> 1 "
     "<UpdatePeriod> 4 <NumSamplesHistory> 2000 <Alpha> 4 <MaxChangePerSample> 0.075 "
     "<IsGradient> F <UpdateCount> 3 <ActiveScalingCount> 0 <MaxChangeScaleStats> 0 "
     "</NaturalGradientAffineComponent> "),
    ("relu1", "<RectifiedLinearComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n"
     "<DerivAvg>  [ 1 0.5 ]\n<Count> 4 <SelfRepairLowerThreshold> 0.05 "
     "<SelfRepairScale> 1e-05 </RectifiedLinearComponent> "),
    ("norm1", "<NormalizeComponent> <Dim> 2 <TargetRms> 1 <ValueAvg>  [ 0 0 ]\n"
     "<DerivAvg>  [ 1 1 ]\n<Count> 8 </NormalizeComponent> "),
    ("final", "<LogSoftmaxComponent> <Dim> 2 <ValueAvg>  [ ]\n<DerivAvg>  [ ]\n"
     "<Count> 0 </LogSoftmaxComponent> "),
]
_NEW_2016_COMPONENTS = [
    ("affine1", "<NaturalGradientAffineComponent> <LearningRate> 0.001 <LinearParams>  [\n"
     "  0.5 -0.25 1 2 \n  0 1 0 -1 ]\n<BiasParams>  [ 0.125 -1 ]\n<RankIn> 2 <RankOut> 1 "
     "<UpdatePeriod> 4 <NumSamplesHistory> 2000 <Alpha> 4 "
     "</NaturalGradientAffineComponent> "),
    ("relu1", "<RectifiedLinearComponent> <Dim> 2 <ValueAvg>  [ 0.5 0.25 ]\n"
     "<DerivAvg>  [ 1 0.5 ]\n<Count> 4 " + _NL_NEW_TAIL + "<SelfRepairLowerThreshold> 0.05 "
     "<SelfRepairScale> 1e-05 </RectifiedLinearComponent> "),
    ("norm1", "<NormalizeComponent> <InputDim> 2 <TargetRms> 1 <AddLogStddev> F "
     "</NormalizeComponent> "),
    ("final", "<LogSoftmaxComponent> <Dim> 2 <ValueAvg>  [ ]\n<DerivAvg>  [ ]\n"
     "<Count> 0 " + _NL_NEW_TAIL + "</LogSoftmaxComponent> "),
]

# ecb20f42c (2015-07-27) .. 66b8fb557 (2015-08-02): output-node lines without
# objective= (Kaldi's reader defaults it to linear); an AffineComponent of then.
_OLD_2015_CONFIG = ("input-node name=input dim=2\n"
                    "component-node name=affine1 component=affine1 input=input\n"
                    "output-node name=output input=affine1\n")
_OLD_2015_COMPONENTS = [
    ("affine1", "<AffineComponent> <LearningRate> 0.001 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n<IsGradient> F </AffineComponent> ")]
_NEW_2015_CONFIG = _OLD_2015_CONFIG.replace("input=affine1\n",
                                            "input=affine1 objective=linear\n")
_NEW_2015_COMPONENTS = [
    ("affine1", "<AffineComponent> <LearningRate> 0.001 <LinearParams>  " + _ONE_BY_TWO
     + "<BiasParams>  [ 3 ]\n</AffineComponent> ")]

NNET_CASES = [
    pytest.param(_nnet_text(_OLD_2016_CONFIG, _OLD_2016_COMPONENTS),
                 _nnet_text(_OLD_2016_CONFIG, _NEW_2016_COMPONENTS), id="2016"),
    pytest.param(_nnet_text(_OLD_2015_CONFIG, _OLD_2015_COMPONENTS),
                 _nnet_text(_NEW_2015_CONFIG, _NEW_2015_COMPONENTS), id="2015-07"),
]

# the token kinds of the networks' binary forms
_NNET_KINDS = _kinds(NumComponents=("int",))


def _nnet_binary(text):
    """The binary form of an nnet3 text file: the config section is the same
    text in both modes."""
    head, sep, rest = text.partition("\n\n")
    return b"\0B" + head.encode() + b"\n\n" + \
        to_binary(rest, _NNET_KINDS)


@pytest.mark.parametrize("old, new", NNET_CASES)
def test_old_nnet_text(old, new):
    nnet = Nnet.from_bytes(old.encode())
    assert nnet.to_bytes(binary=False).decode() == new
    assert nnet.get_node_index("output") >= 0
    assert nnet.nodes[nnet.get_node_index("output")].objective_type == 0  # kLinear


@pytest.mark.parametrize("old, new", NNET_CASES)
def test_old_nnet_binary(old, new):
    nnet = Nnet.from_bytes(_nnet_binary(old))
    assert nnet.to_bytes(binary=True) == _nnet_binary(new)


# --------------------------------------------------------------------------
# transition models (.mdl)
# --------------------------------------------------------------------------

_LOG_PROBS = np.log(np.array([1.0, 0.75, 0.25], dtype=np.float64)).astype(np.float32)
_LOG_PROBS[0] = 0.0


def _binary_trans_model(old):
    """A one-phone, two-state (one emitting) transition model in binary: as
    dd481707c (2016-10-19) wrote it when ``old`` (topology with the -1
    marker and a self-loop pdf-class per state, <Tuples> of four), else as
    today's Write does for an HMM (no marker, <Triples>)."""
    out = OutputStream(binary=True)
    out.write_token("<TransitionModel>")
    out.write_token("<Topology>")
    out.write_int_vector([1])
    out.write_int_vector([-1, 0])
    if old:
        out.write_int32(-1)
    out.write_int32(1)            # one entry
    out.write_int32(2)            # two states
    for pdf_class, transitions in ((0, [(0, 0.75), (1, 0.25)]), (-1, [])):
        out.write_int32(pdf_class)
        if old:
            out.write_int32(pdf_class)   # self-loop pdf-class
        out.write_int32(len(transitions))
        for dest, prob in transitions:
            out.write_int32(dest)
            out.write_float(prob)
    out.write_token("</Topology>")
    out.write_token("<Tuples>" if old else "<Triples>")
    out.write_int32(1)
    for v in ((1, 0, 0, 0) if old else (1, 0, 0)):
        out.write_int32(v)
    out.write_token("</Tuples>" if old else "</Triples>")
    out.write_token("<LogProbs>")
    out.write_vector(_LOG_PROBS)
    out.write_token("</LogProbs>")
    out.write_token("</TransitionModel>")
    return out.getvalue()


def test_old_transition_model_binary_2016_10():
    tm = TransitionModel().read_from(InputStream(_binary_trans_model(True), True))
    assert tm.tuples == [(1, 0, 0, 0)]
    assert tm.topo.is_hmm()
    out = OutputStream(binary=True)
    tm.write_to(out)
    assert out.getvalue() == _binary_trans_model(False)


# HmmTopology's text reader takes <ForwardPdfClass>/<SelfLoopPdfClass> pairs (what
# Kaldi writes since 374614386, 2016-11-18, for non-HMM topologies) and
# TransitionModel's reader takes <Tuples>; when every pair is equal the model is an
# HMM and today's Write gives <PdfClass> and <Triples>.
_TEXT_TM = ("<TransitionModel> \n<Topology> \n<TopologyEntry> \n<ForPhones> \n1 \n"
            "</ForPhones> \n<State> 0 %s<Transition> 0 0.75 <Transition> 1 0.25 </State> \n"
            "<State> 1 </State> \n</TopologyEntry> \n</Topology> \n%s\n"
            "<LogProbs> \n [ 0 -0.2876821 -1.386294 ]\n</LogProbs> \n</TransitionModel> \n")


def test_old_transition_model_text_tuples():
    old = _TEXT_TM % ("<ForwardPdfClass> 0 <SelfLoopPdfClass> 0 ",
                      "<Tuples> 1 \n1 0 0 0 \n</Tuples> ")
    new = _TEXT_TM % ("<PdfClass> 0 ", "<Triples> 1 \n1 0 0 \n</Triples> ")
    tm = TransitionModel().read_from(InputStream(old.encode(), False))
    assert tm.tuples == [(1, 0, 0, 0)]
    out = OutputStream(binary=False)
    tm.write_to(out)
    assert out.getvalue().decode() == new


# --------------------------------------------------------------------------
# PermuteComponent as d56c66503 (2015-10-20) .. 2b835f775 (2015-12-21) wrote it
# in binary: the column map as a float vector whose last entry was never set
# (0); Kaldi's reader rounds the entries and sets the last one to dim-1.
# --------------------------------------------------------------------------

def _permute_binary(column_map, as_floats):
    out = OutputStream(binary=True)
    out.write_token("<PermuteComponent>")
    out.write_token("<ColumnMap>")
    if as_floats:
        out.write_vector(np.array(column_map, dtype=np.float32))
    else:
        out.write_int_vector(column_map)
    out.write_token("</PermuteComponent>")
    return out.getvalue()


def test_old_permute_float_map_binary():
    comp = read_component(_permute_binary([2, 0, 1, 0], as_floats=True), binary=True)
    assert list(comp.column_map) == [2, 0, 1, 3]
    assert write_component(comp, binary=True) == _permute_binary([2, 0, 1, 3], False)


def test_old_permute_float_map_text_is_not_a_permutation():
    # in text the old float vector reads as integers [2 0 1 0]: not a
    # permutation, which Kaldi's reader rejects too
    with pytest.raises(KaldiFormatError):
        read_component(b"<PermuteComponent> <ColumnMap>  [ 2 0 1 0 ]\n"
                       b"</PermuteComponent> ", binary=False)


# --------------------------------------------------------------------------
# older formats Kaldi's current readers reject: a format error here too
# --------------------------------------------------------------------------

REJECTED = [
    # cd3ae2d2a (2015-05-08) .. a7398bc20 (2015-08-12): sums, not averages
    pytest.param(b"<SigmoidComponent> <Dim> 1 <ValueSum>  [ 1 ]\n<DerivSum>  [ 1 ]\n"
                 b"<Count> 1 </SigmoidComponent> ", id="NonlinearComponent/2015-05"),
    # c362b2cf4 (2017-12-31): <OderivRms> before <Count>, no <OderivCount>
    pytest.param(b"<TanhComponent> <Dim> 1 <ValueAvg>  [ 0 ]\n<DerivAvg>  [ 0 ]\n"
                 b"<OderivRms>  [ 0 ]\n<Count> 0 <NumDimsSelfRepaired> 0 "
                 b"<NumDimsProcessed> 0 </TanhComponent> ", id="NonlinearComponent/2017-12-31"),
    # acda33678 (2017-12-22) .. 8368ab4e7 (2017-12-29): <DiagonalPowerInOut>
    pytest.param(b"<NaturalGradientAffineComponent> <LearningRate> 0.001 <LinearParams>  [\n"
                 b"  1 ]\n<BiasParams>  [ 0 ]\n<RankIn> 1 <RankOut> 1 <DiagonalPowerInOut> 0.5 0.5 "
                 b"<UpdatePeriod> 4 <NumSamplesHistory> 2000 <Alpha> 4 "
                 b"</NaturalGradientAffineComponent> ", id="NaturalGradientAffine/2017-12-22"),
    # f341b70c1 (2015-08-27): no clipping counts
    pytest.param(b"<ClipGradientComponent> <Dim> 1 <ClippingThreshold> 15 "
                 b"<NormBasedClipping> T </ClipGradientComponent> ", id="ClipGradient/2015-08-27"),
    # c2e72fa66 (2015-09-22) .. ea5dedd1e (2016-01-19): the 1-d max-pooling
    pytest.param(b"<MaxpoolingComponent> <InputDim> 4 <OutputDim> 2 <PoolSize> 2 "
                 b"<PoolStride> 2 </MaxpoolingComponent> ", id="Maxpooling/2015-09"),
    # e71ddae4f (2017-12-27) .. f654281ef (2017-12-29): <Power>
    pytest.param(b"<BatchNormComponent> <Dim> 1 <BlockDim> 1 <Power> -0.25 <Epsilon> 0.001 "
                 b"<TargetRms> 1 <TestMode> F <Count> 0 <StatsMean>  [ 0 ]\n"
                 b"<StatsVar>  [ 0 ]\n</BatchNormComponent> ", id="BatchNorm/2017-12-27"),
    # 6c59a3b89 (2016-01-29): <OutputPeriod>, <LogCountFeatures>
    pytest.param(b"<StatisticsPoolingComponent> <InputDim> 3 <InputPeriod> 1 <OutputPeriod> 1 "
                 b"<LeftContext> 0 <RightContext> 1 <LogCountFeatures> F <OutputStddevs> F "
                 b"<VarianceFloor> 1e-10 </StatisticsPoolingComponent> ",
                 id="StatisticsPooling/2016-01-29"),
    # 99bef31af (2016-02-03): <AddLogSum>
    pytest.param(b"<NormalizeComponent> <Dim> 2 <TargetRms> 1 <AddLogSum> F "
                 b"<ValueAvg>  [ 0 0 ]\n<DerivAvg>  [ 0 0 ]\n<Count> 0 </NormalizeComponent> ",
                 id="Normalize/2016-02-03"),
]


@pytest.mark.parametrize("data", REJECTED)
def test_rejected_old_component(data):
    with pytest.raises(KaldiFormatError):
        read_component(data, binary=False)


def test_rejected_old_computation_version():
    # NnetComputation versions before 5 (7c8e1a3f6, 2018-01-25): Kaldi refuses
    # them (the compiled-computation cache is then rebuilt), and so do we.
    for head in (b"<NnetComputation> <Version> 4 <NumMatrices> 0 ",
                 b"<NnetComputation> <NumMatrices> 0 "):
        with pytest.raises(KaldiFormatError, match="version"):
            read_computation(InputStream(head + b"<Matrices> ", False))


def test_rejected_old_am_nnet_without_context():
    # 8bbe37e34 (2015-05-22) .. 64d92fb47 (2015-08-01): AmNnetSimple had no
    # <LeftContext>/<RightContext>
    text = _nnet_text(_NEW_2015_CONFIG, _NEW_2015_COMPONENTS) + " <Priors>  [ ]\n"
    with pytest.raises(KaldiFormatError):
        AmNnetSimple().read_from(InputStream(text.encode(), False))


# --------------------------------------------------------------------------
# the opening tag once more: every component's (and precomputed-indexes') Read
# in Kaldi takes it again after ReadNew has read it (ExpectOneOrTwoTokens,
# ReadUpdatableCommon and the hand-written readers), but not a third time
# --------------------------------------------------------------------------

def _bundled_components():
    """One component of each type found in the bundled networks and in the
    expected texts above, plus the types only made from config lines."""
    from conftest import TEST_DATA
    comps = {}
    paths = sorted((TEST_DATA / "models").glob("*/model.raw"))
    paths += sorted((TEST_DATA / "models").glob("random/*/model.raw"))
    for path in paths:
        for comp in Nnet.read(str(path)).components:
            comps.setdefault(comp.type_name, comp)
    for param in CASES:
        comp = read_component(param.values[2].encode(), binary=False)
        comps.setdefault(comp.type_name, comp)
    for line in ("type=ConstantComponent output-dim=3",
                 "type=DistributeComponent input-dim=4 output-dim=2",
                 "type=RestrictedAttentionComponent num-heads=1 key-dim=2 value-dim=2 "
                 "num-left-inputs=1 num-right-inputs=1"):
        comp = Component.from_config_line(ConfigLine(line))
        comps.setdefault(comp.type_name, comp)
    return [pytest.param(c, id=t) for t, c in sorted(comps.items())]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("comp", _bundled_components())
def test_repeated_opening_tag(comp, binary):
    data = write_component(comp, binary)
    tag = ("<%s> " % comp.type_name).encode()
    assert data.startswith(tag)
    again = read_component(tag + data, binary)
    assert write_component(again, binary) == data
    with pytest.raises(KaldiFormatError, match="repeated"):
        read_component(tag + tag + data, binary)


def _computations_with_precomputed_indexes():
    from conftest import TEST_DATA
    paths = sorted(TEST_DATA.glob("**/computation.opt.kaldi"))
    return [pytest.param(p, id=str(p.relative_to(TEST_DATA))) for p in paths
            if re.search(rb"<(?!Num)\w+PrecomputedIndexes> ", p.read_bytes())]


@pytest.mark.parametrize("path", _computations_with_precomputed_indexes())
def test_repeated_precomputed_indexes_tag(path):
    data = path.read_bytes()
    doubled = re.sub(rb"<((?!Num)\w+PrecomputedIndexes)> ", rb"<\1> <\1> ", data)
    assert doubled != data

    def rewrite(raw):
        out = OutputStream(binary=True)
        out.write_header()
        write_computation(read_computation(InputStream.from_bytes(raw)), out)
        return out.getvalue()

    assert rewrite(doubled) == rewrite(data)
