# Kaldi's CommandType values as C constants for the optimizer's kernels; the
# same numbering as pynnet3.compiler.computation.CommandType (Kaldi's order),
# which tests/test_fast_command_types.py checks.

cdef enum:
    kAllocMatrix = 0
    kDeallocMatrix = 1
    kSwapMatrix = 2
    kSetConst = 3
    kPropagate = 4
    kBackprop = 5
    kBackpropNoModelUpdate = 6
    kMatrixCopy = 7
    kMatrixAdd = 8
    kCopyRows = 9
    kAddRows = 10
    kCopyRowsMulti = 11
    kCopyToRowsMulti = 12
    kAddRowsMulti = 13
    kAddToRowsMulti = 14
    kAddRowRanges = 15
    kCompressMatrix = 16
    kDecompressMatrix = 17
    kAcceptInput = 18
    kProvideOutput = 19
    kNoOperation = 20
    kNoOperationPermanent = 21
    kNoOperationMarker = 22
    kNoOperationLabel = 23
    kGotoLabel = 24
