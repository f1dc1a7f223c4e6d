"""All nnet3 component types, one module per family.

Importing this package imports every family module, which registers each
component type under Kaldi's type name (see ``base.Component.new_of_type``).
"""

import importlib
import pkgutil

from .base import Component, ComponentProperty, PrecomputedIndexes, UpdatableComponent

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(__name__ + "." + _module.name)

__all__ = ["Component", "ComponentProperty", "PrecomputedIndexes", "UpdatableComponent"]
