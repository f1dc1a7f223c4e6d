"""A progress bar on stderr for tools whose number of inputs is known (scp
input), shown only when stderr is a terminal so logs stay clean."""

import sys
import time


class ProgressBar:
    """``step()`` once per input; ``close()`` at the end. Does nothing when
    ``total`` is None or stderr is not a terminal. Redraws at most 10 times a
    second."""

    def __init__(self, total, unit, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.active = bool(total) and tty
        self.total = total
        self.unit = unit
        self.done = 0
        self.start = time.perf_counter()
        self._last_draw = 0.0

    def step(self):
        if not self.active:
            return
        self.done += 1
        now = time.perf_counter()
        if now - self._last_draw >= 0.1 or self.done == self.total:
            self._last_draw = now
            self._draw(now)

    def _draw(self, now):
        width = 30
        filled = width * self.done // self.total
        elapsed = now - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        self.stream.write("\r[%s%s] %d/%d %s %.1f/s" % ("#" * filled, "." * (width - filled),
                                                       self.done, self.total, self.unit, rate))
        self.stream.flush()

    def close(self):
        if self.active:
            self._draw(time.perf_counter())
            self.stream.write("\n")
            self.stream.flush()
            self.active = False
