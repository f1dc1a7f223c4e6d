# cython: language_level=3, boundscheck=False, wraparound=False
# distutils: language = c++
"""Variable merging's scan for candidate commands in C (twin:
``merge_candidates_py`` in ``pynnet3.optimize.variable_merging``).

Each merging round visits every command to find the few that may be merges
(assignments, in-place propagates and backprops); on a quarter-million-command
computation that visit dominated a round. The candidates depend only on
command types and arguments the round does not change before reaching them,
so they can be listed up front.
"""

from pynnet3._fast.command_types cimport *


def merge_candidates(list commands, list component_properties, bint remove_assignments,
                     bint propagate_in_place, bint backprop_in_place,
                     long propagate_in_place_bit, long backprop_in_place_bit):
    """[(command_index, s1, s2)] in command order: s1 is the submatrix whose
    data stops being needed and s2 the one whose data starts (see
    ``merge_candidates_py`` for the rules); both are > 0."""
    cdef list out = []
    cdef Py_ssize_t i = -1
    cdef object c
    cdef int t
    cdef long s1, s2, a3, a4
    for c in commands:
        i += 1
        t = c.command_type
        if t == kMatrixCopy:
            if not remove_assignments:
                continue
            s1 = c.arg2
            s2 = c.arg1
        elif t == kPropagate:
            if not propagate_in_place or not (
                    <long>component_properties[c.arg1] & propagate_in_place_bit):
                continue
            s1 = c.arg3
            s2 = c.arg4
        elif t == kBackprop or t == kBackpropNoModelUpdate:
            if not backprop_in_place or not (
                    <long>component_properties[c.arg1] & backprop_in_place_bit):
                continue
            s1 = c.arg5
            s2 = c.arg6
            a3 = c.arg3
            a4 = c.arg4
            if s1 == a3 or s1 == a4 or s2 == a3 or s2 == a4:
                continue
        else:
            continue
        if s1 > 0 and s2 > 0:
            out.append((i, s1, s2))
    return out
