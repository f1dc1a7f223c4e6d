"""pynnet3: Kaldi's nnet3 neural-network framework in Python.

Top-level names are imported lazily (on first use), so ``import pynnet3`` is
cheap and a problem in one subpackage cannot break importing another:

    >>> from pynnet3 import Nnet
    >>> nnet = Nnet.read("final.raw")
"""

import importlib

__version__ = "0.1.0"

# public name -> (module, attribute)
_EXPORTS = {
    "Nnet": ("pynnet3.nnet.nnet", "Nnet"),
    "NetworkNode": ("pynnet3.nnet.node", "NetworkNode"),
    "NodeType": ("pynnet3.nnet.node", "NodeType"),
    "ObjectiveType": ("pynnet3.nnet.node", "ObjectiveType"),
    "Descriptor": ("pynnet3.nnet.descriptor", "Descriptor"),
    "parse_descriptor": ("pynnet3.nnet.descriptor_parser", "parse_descriptor"),
    "Index": ("pynnet3.common.index", "Index"),
    "Cindex": ("pynnet3.common.index", "Cindex"),
    "Component": ("pynnet3.components", "Component"),
    "AmNnetSimple": ("pynnet3.model.am", "AmNnetSimple"),
    "nnet_info": ("pynnet3.model.info", "nnet_info"),
    "TransitionModel": ("pynnet3.hmm.transition", "TransitionModel"),
    "ComputationRequest": ("pynnet3.compiler.request", "ComputationRequest"),
    "IoSpecification": ("pynnet3.compiler.request", "IoSpecification"),
    "NnetComputation": ("pynnet3.compiler.computation", "NnetComputation"),
    "NnetComputer": ("pynnet3.compute.computer", "NnetComputer"),
    "NnetOptimizeOptions": ("pynnet3.optimize.options", "NnetOptimizeOptions"),
    "CachingOptimizingCompiler": ("pynnet3.driver.caching", "CachingOptimizingCompiler"),
    "NnetSimpleLoopedComputationOptions": ("pynnet3.driver.compile_looped",
                                           "NnetSimpleLoopedComputationOptions"),
    "DecodableNnetSimpleLoopedInfo": ("pynnet3.compute.decodable_simple_looped",
                                     "DecodableNnetSimpleLoopedInfo"),
    "DecodableNnetSimpleLooped": ("pynnet3.compute.decodable_simple_looped",
                                 "DecodableNnetSimpleLooped"),
    "DecodableNnetLoopedOnline": ("pynnet3.compute.decodable_simple_looped",
                                 "DecodableNnetLoopedOnline"),
    "compute_utterance": ("pynnet3.compute.api", "compute_utterance"),
    "compute_xvector": ("pynnet3.compute.api", "compute_xvector"),
    "scale_nnet": ("pynnet3.nnet.component_ops", "scale_nnet"),
    "set_nnet_as_gradient": ("pynnet3.nnet.component_ops", "set_nnet_as_gradient"),
    "vectorize_nnet": ("pynnet3.nnet.component_ops", "vectorize_nnet"),
    "compile": ("pynnet3.driver.compile_and_optimize", "compile"),
    "decode": ("pynnet3.decoding.api", "decode"),
    "Decoder": ("pynnet3.decoding.api", "Decoder"),
    "PynnetError": ("pynnet3.errors", "PynnetError"),
    "KaldiFormatError": ("pynnet3.errors", "KaldiFormatError"),
    "ConfigError": ("pynnet3.errors", "ConfigError"),
    "DescriptorError": ("pynnet3.errors", "DescriptorError"),
    "NnetError": ("pynnet3.errors", "NnetError"),
    "ComputationError": ("pynnet3.errors", "ComputationError"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError("module 'pynnet3' has no attribute %r" % name)
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
