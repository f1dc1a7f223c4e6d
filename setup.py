"""Builds the Cython extensions under pynnet3/_fast; everything else is in pyproject.toml."""
import glob
import os
import sys

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "pynnet3._fast." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=[numpy.get_include()],
        # -ffp-contract=off: no fused multiply-adds where a target has them
        # (x86-64's baseline has none; aarch64 does): Kaldi's numbers round
        # a product before they add it.
        extra_compile_args=["-O2", "-ffp-contract=off"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for path in sorted(glob.glob(os.path.join("pynnet3", "_fast", "*.pyx")))
]

setup(ext_modules=cythonize(extensions, language_level=3,
                            compiler_directives={"boundscheck": False, "wraparound": False}))


def _record_interpreter():
    """Writes the interpreter running this build (pip's, for ``pip install -e``;
    the caller's for ``setup.py build_ext``) to scripts/.python in a source
    checkout: scripts/path.sh and the scripts/bin shims run the tools with it,
    so a recipe needs no active virtual environment."""
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.path.join(here, "scripts", ".python")
    if not os.path.isfile(os.path.join(here, "scripts", "path.sh")):
        return
    try:
        with open(target + ".tmp", "w", encoding="utf-8") as f:
            f.write(sys.executable + "\n")
        os.replace(target + ".tmp", target)
    except OSError:
        pass        # a read-only checkout: the shims look for an interpreter instead


_record_interpreter()
