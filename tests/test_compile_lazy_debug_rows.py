"""The shortcut expansion reads debug rows that are not built yet from the
compiled steps' packed keys: the same (n, (node, t, x)) arrays as reading the
built lists, on a mix of built and unbuilt debug infos."""

import pytest

from reference_cases import COMPILE_CASES as CASES, load_case

import pynnet3.components  # noqa: F401  (registers component types)
from pynnet3.driver.compile_and_optimize import compile as compile_
from pynnet3.compiler.shortcut import _cindex_arrays, _debug_row_arrays, _debug_row_count

pytest.importorskip("pynnet3._fast.steps_kernel")


@pytest.mark.skipif(not CASES, reason="no reference cases")
def test_debug_rows_from_keys_match_built_lists():
    for case in CASES[:20]:
        nnet, request = load_case(case)
        computation = compile_(nnet, request, optimize=False)
        infos = computation.matrix_debug_info[1:]
        for info in infos[::3]:      # some built, the rest not
            info.cindexes
        sizes = [_debug_row_count(info) for info in infos]
        n, key = _debug_row_arrays(infos, sizes)
        n_ref, key_ref = _cindex_arrays([c for info in infos for c in info.cindexes])
        assert sizes == [len(info.cindexes) for info in infos]
        assert (n == n_ref).all() and (key == key_ref).all()
