"""Running computations: the NnetComputer interpreter and its backends."""

from .backend import Backend, CupyBackend, get_backend
from .computer import NnetComputer

__all__ = ["Backend", "CupyBackend", "NnetComputer", "get_backend"]
