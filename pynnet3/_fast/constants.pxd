# The constants the kernels share with pynnet3's Python code, each block a copy
# of one Python enum with the same names and values (Kaldi's), which
# tests/test_fast_constants.py checks block by block. Kernels cimport them from
# here and define none of their own.

# CommandType: pynnet3.compiler.computation.CommandType
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

# ComponentProperty: pynnet3.components.base.ComponentProperty
cdef enum:
    kSimpleComponent = 0x001
    kUpdatableComponent = 0x002
    kPropagateInPlace = 0x004
    kPropagateAdds = 0x008
    kReordersIndexes = 0x010
    kBackpropAdds = 0x020
    kBackpropNeedsInput = 0x040
    kBackpropNeedsOutput = 0x080
    kBackpropInPlace = 0x100
    kStoresStats = 0x200
    kInputContiguous = 0x400
    kOutputContiguous = 0x800
    kUsesMemo = 0x1000
    kRandomComponent = 0x2000

# NodeType: pynnet3.nnet.node.NodeType
cdef enum:
    kInput = 0
    kDescriptor = 1
    kComponent = 2
    kDimRange = 3
    kNone = 4

# ComputableInfo: pynnet3.compiler.computability
cdef enum:
    kUnknown = 0
    kComputable = 1
    kNotComputable = 2
    kWillNotCompute = 3

# DescriptorOpcode: pynnet3.compiler.descriptor_program
cdef enum:
    F_NODE = 1
    F_OFFSET = 2
    F_SWITCH = 3
    F_ROUND = 4
    F_REPLACE_T = 5
    F_REPLACE_X = 6
    S_SIMPLE = 10
    S_OPTIONAL = 11
    S_CONST = 12
    S_SUM = 13
    S_FAILOVER = 14

# AccessType: pynnet3.optimize.analysis_types.AccessType
cdef enum:
    kReadAccess = 0
    kWriteAccess = 1
    kReadWriteAccess = 2
