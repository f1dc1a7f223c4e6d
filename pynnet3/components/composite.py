"""CompositeComponent: a sequence of simple components run as one.

Kaldi uses it to save memory: the intermediate values are not kept between
the forward and backward passes but recomputed in the backward pass, and
both passes process at most ``max-rows-process`` rows at a time.

Guarantees:
- The sub-components are any registered simple component types (read with
  ``Component.read_new``); a CompositeComponent may not contain another one
  nor a random component (as in Kaldi's InitFromConfig).
- propagate/backprop reproduce Kaldi's computation, including the row
  chunking, re-propagation in backprop (skipping the propagations Kaldi
  skips) and the StoreStats() calls on the sub-components of ``to_update``
  during backprop (Kaldi stores activation statistics there, not in a
  separate StoreStats, so ``properties()`` never has kStoresStats).
- I/O is byte-identical to Kaldi's; ``info()`` lists the sub-components'
  Info() as Kaldi does.
"""

import numpy as np

from ..common.config_line import ConfigLine
from ..errors import ConfigError, NnetError
from .base import Component, P, UpdatableComponent, array_module, read_layout, write_layout

_MAX_COMPONENTS = 100000


class CompositeComponent(UpdatableComponent):
    """Sub-components ``components`` applied in order; ``max_rows_process``
    rows at a time (0 or less: all rows at once)."""

    type_name = "CompositeComponent"

    def __init__(self, components=None, max_rows_process=4096):
        super().__init__()
        self.max_rows_process = max_rows_process
        self.components = []
        if components is not None:
            problem = self.init_components(components, max_rows_process)
            if problem:
                raise NnetError("CompositeComponent: " + problem)

    def init_components(self, components, max_rows_process):
        """Kaldi's Init(): sets the sub-components; returns a description of
        what is wrong with them (not simple, dimensions not chaining) or None."""
        self.components = list(components)
        self.max_rows_process = int(max_rows_process)
        if not self.components:
            return "there must be at least one sub-component"
        for i, c in enumerate(self.components):
            if not c.properties() & P.kSimpleComponent:
                return "sub-component %d (%s) is not a simple component" % (i + 1, c.type_name)
            if i > 0 and c.input_dim() != self.components[i - 1].output_dim():
                return ("sub-component %d (%s) has input-dim %d but sub-component %d (%s) has "
                        "output-dim %d" % (i + 1, c.type_name, c.input_dim(), i,
                                           self.components[i - 1].type_name,
                                           self.components[i - 1].output_dim()))
        return None

    # -- I/O ----------------------------------------------------------------
    def read_body(self, stream):
        start = stream.pos
        read_layout(self, stream, UpdatableComponent.UPDATABLE_COMMON)
        stream.expect_token("<MaxRowsProcess>")
        max_rows_process = stream.read_int32()
        stream.expect_token("<NumComponents>")
        at = stream.pos
        num_components = stream.read_int32()
        if num_components < 0 or num_components > _MAX_COMPONENTS:
            raise stream.error("CompositeComponent: bad <NumComponents> %d" % num_components, at)
        components = [Component.read_new(stream) for _ in range(num_components)]
        problem = self.init_components(components, max_rows_process)
        if problem:
            raise stream.error("CompositeComponent: " + problem, start)
        stream.expect_token("</CompositeComponent>")

    def write_body(self, stream):
        write_layout(self, stream, UpdatableComponent.UPDATABLE_COMMON)
        stream.write_token("<MaxRowsProcess>")
        stream.write_int32(self.max_rows_process)
        stream.write_token("<NumComponents>")
        stream.write_int32(len(self.components))
        for c in self.components:
            c.write_to(stream)

    # -- configuration ----------------------------------------------------------
    def init_from_config(self, cfl):
        """Keys: num-components (required, >= 1), max-rows-process (4096),
        component1 ... componentN: each a quoted config line
        ``'type=XxxComponent key=value ...'`` of a simple, non-random,
        non-composite component. (No learning-rate keys: as in Kaldi, the
        composite's own learning rate starts at 0.001.)"""
        self.__init__()
        max_rows_process = cfl.get_int("max-rows-process", 4096)
        num_components = cfl.get_int("num-components")
        if num_components is None or num_components < 1:
            raise cfl.error("Expected num-components (>= 1) in CompositeComponent config line")
        components = []
        for i in range(1, num_components + 1):
            key = "component%d" % i
            text = cfl.get_str(key)
            if text is None:
                raise cfl.error("Expected '%s' to be defined in CompositeComponent config line"
                                % key)
            components.append(self._sub_component_from_config(cfl, key, text))
        problem = self.init_components(components, max_rows_process)
        if problem:
            raise cfl.error("CompositeComponent: " + problem)

    @staticmethod
    def _sub_component_from_config(cfl, key, text):
        try:
            nested = ConfigLine(text, cfl.source, cfl.line_number)
        except ConfigError as e:
            raise cfl.error("could not parse %s='%s': %s" % (key, text, e.detail)) from None
        type_name = nested.get_str("type")
        if nested.first_token != "" or type_name is None:
            raise cfl.error("%s='%s' must be 'type=XxxComponent key=value ...'" % (key, text))
        if type_name == "CompositeComponent":
            raise cfl.error("%s: a CompositeComponent may not contain a CompositeComponent "
                            "(use a smaller max-rows-process instead)" % key)
        comp = Component.new_of_type(type_name)
        if comp is None:
            raise cfl.error("%s: unknown component type '%s'" % (key, type_name))
        try:
            comp.init_from_config(nested)
            nested.check_all_used()
        except ConfigError as e:
            raise cfl.error("%s: %s" % (key, e.detail)) from None
        props = comp.properties()
        if props & P.kRandomComponent or not props & P.kSimpleComponent:
            raise cfl.error("%s: CompositeComponent may not contain a %s (it must be simple and "
                            "not random)" % (key, type_name))
        return comp

    # -- description --------------------------------------------------------------
    def is_updatable_inside(self):
        """Kaldi's IsUpdatable(): whether any sub-component is updatable."""
        return any(c.properties() & P.kUpdatableComponent for c in self.components)

    def properties(self):
        last = self.components[-1].properties()
        first = self.components[0].properties()
        ans = (P.kSimpleComponent | P.kBackpropNeedsInput
               | (last & (P.kPropagateAdds | P.kBackpropNeedsOutput | P.kOutputContiguous))
               | (first & (P.kBackpropAdds | P.kInputContiguous))
               | (P.kUpdatableComponent if self.is_updatable_inside() else 0))
        if last & P.kStoresStats:
            ans |= P.kBackpropNeedsOutput
        return int(ans)

    def input_dim(self):
        return self.components[0].input_dim()

    def output_dim(self):
        return self.components[-1].output_dim()

    def info(self):
        return "CompositeComponent " + ", ".join(
            "sub-component%d = { %s }" % (i + 1, c.info()) for i, c in enumerate(self.components))

    def num_components(self):
        return len(self.components)

    def get_component(self, i):
        return self.components[i]

    def set_component(self, i, component):
        self.components[i] = component

    # -- computation ----------------------------------------------------------------
    def _chunks(self, num_rows):
        step = self.max_rows_process
        if step > 0 and num_rows > step:
            return [(r, min(r + step, num_rows)) for r in range(0, num_rows, step)]
        return None

    @staticmethod
    def _new_matrix(xp, rows, cols):
        return xp.zeros((rows, cols), dtype=xp.float32)

    def propagate(self, indexes, in_value, out):
        chunks = self._chunks(in_value.shape[0])
        if chunks is not None:
            for a, b in chunks:
                self.propagate(None, in_value[a:b], out[a:b])
            return None
        xp = array_module(in_value)
        num_rows = in_value.shape[0]
        this_in = in_value
        n = len(self.components)
        for i, c in enumerate(self.components):
            this_out = out if i + 1 == n else self._new_matrix(xp, num_rows, c.output_dim())
            c.propagate(None, this_in, this_out)   # memos are regenerated in backprop
            this_in = this_out
        return None

    @property
    def kaldi_exact(self):
        return all(c.kaldi_exact for c in self.components)

    def propagate_kaldi_exact(self, indexes, in_value, out, kaldi):
        chunks = self._chunks(in_value.shape[0])
        if chunks is not None:
            for a, b in chunks:
                self.propagate_kaldi_exact(None, in_value[a:b], out[a:b], kaldi)
            return None
        num_rows = in_value.shape[0]
        this_in = in_value
        n = len(self.components)
        for i, c in enumerate(self.components):
            this_out = out if i + 1 == n else self._new_matrix(np, num_rows, c.output_dim())
            c.propagate_kaldi_exact(None, this_in, this_out, kaldi)
            this_in = this_out
        return None

    def backprop(self, debug_info, indexes, in_value, out_value, out_deriv, memo,
                 to_update, in_deriv):
        if out_value is not None and out_value.size == 0:
            out_value = None
        chunks = self._chunks(in_value.shape[0])
        if chunks is not None:
            for a, b in chunks:
                self.backprop(debug_info, None, in_value[a:b],
                              None if out_value is None else out_value[a:b],
                              out_deriv[a:b], None, to_update,
                              None if in_deriv is None else in_deriv[a:b])
            return
        xp = array_module(out_deriv)
        comps = self.components
        n = len(comps)
        num_rows = in_value.shape[0]
        props = [c.properties() for c in comps]

        # Which propagations to redo (Kaldi skips the last one unless it uses a
        # memo, and the last-but-one when nothing needs its output).
        num_to_propagate = n
        if not props[-1] & P.kUsesMemo:
            num_to_propagate -= 1
            if n > 1 and not props[n - 2] & (P.kBackpropNeedsOutput | P.kUsesMemo) \
                    and not props[n - 1] & P.kBackpropNeedsInput:
                num_to_propagate -= 1

        outputs = [None] * n
        memos = [None] * n
        for i in range(num_to_propagate):
            outputs[i] = self._new_matrix(xp, num_rows, comps[i].output_dim())
            memos[i] = comps[i].propagate(None, in_value if i == 0 else outputs[i - 1],
                                          outputs[i])

        deriv = out_deriv
        for i in range(n - 1, -1, -1):
            this_in = in_value if i == 0 else outputs[i - 1]
            this_out = out_value if i == n - 1 else outputs[i]
            sub_to_update = None if to_update is None else to_update.components[i]
            if sub_to_update is not None and props[i] & P.kStoresStats:
                sub_to_update.store_stats(this_in, this_out, memos[i])
            this_in_deriv = in_deriv if i == 0 else self._new_matrix(xp, num_rows,
                                                                      comps[i].input_dim())
            # Kaldi skips the first backprop when it would do nothing.
            if not (i == 0 and not props[0] & P.kUpdatableComponent and in_deriv is None):
                comps[i].backprop(debug_info, None, this_in, this_out, deriv, memos[i],
                                  sub_to_update, this_in_deriv)
            if memos[i] is not None:
                comps[i].delete_memo(memos[i])
            deriv = this_in_deriv

    def zero_stats(self):
        for c in self.components:
            c.zero_stats()

    # -- parameters ----------------------------------------------------------------
    def _updatable(self):
        return [c for c in self.components if c.properties() & P.kUpdatableComponent]

    def _check_other(self, other):
        if not isinstance(other, CompositeComponent) or \
                len(other.components) != len(self.components):
            raise NnetError("CompositeComponent: mismatching topologies")

    def scale(self, alpha):
        for c in self.components:
            c.scale(alpha)

    def add(self, alpha, other):
        self._check_other(other)
        for c, o in zip(self.components, other.components):
            c.add(alpha, o)

    def perturb_params(self, stddev):
        for c in self._updatable():
            c.perturb_params(stddev)

    def set_underlying_learning_rate(self, lrate):
        UpdatableComponent.set_underlying_learning_rate(self, lrate)
        for c in self._updatable():
            c.set_underlying_learning_rate(self.learning_rate)

    def set_actual_learning_rate(self, lrate):
        UpdatableComponent.set_actual_learning_rate(self, lrate)
        for c in self._updatable():
            c.set_actual_learning_rate(lrate)

    def set_as_gradient(self):
        UpdatableComponent.set_as_gradient(self)
        for c in self._updatable():
            c.set_as_gradient()

    def num_parameters(self):
        return int(sum(c.num_parameters() for c in self._updatable()))

    def vectorize(self):
        parts = [c.vectorize() for c in self._updatable()]
        if not parts:
            return np.zeros(0, dtype=np.float32)
        xp = array_module(parts[0])
        return xp.concatenate([xp.asarray(p) for p in parts]).astype(xp.float32, copy=False)

    def unvectorize(self, params):
        if len(params) != self.num_parameters():
            raise NnetError("CompositeComponent: unvectorize needs %d parameters, got %d"
                            % (self.num_parameters(), len(params)))
        offset = 0
        for c in self._updatable():
            n = c.num_parameters()
            c.unvectorize(params[offset:offset + n])
            offset += n

    def dot_product(self, other):
        self._check_other(other)
        total = np.float32(0.0)
        for c, o in zip(self.components, other.components):
            if c.properties() & P.kUpdatableComponent:
                total += np.float32(c.dot_product(o))
        return float(total)
