"""Builds the Cython extensions under pynnet3/_fast; everything else is in pyproject.toml."""
import glob
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "pynnet3._fast." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=[numpy.get_include()],
        extra_compile_args=["-O2"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )
    for path in sorted(glob.glob(os.path.join("pynnet3", "_fast", "*.pyx")))
]

setup(ext_modules=cythonize(extensions, language_level=3,
                            compiler_directives={"boundscheck": False, "wraparound": False}))
