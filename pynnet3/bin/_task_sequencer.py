"""Kaldi's TaskSequencer (util/kaldi-thread.h) with threads: jobs run on up
to ``num_threads`` worker threads at once and their results are handed
back, in the order the jobs were given, to the main thread, which writes
them. The decoding kernels (search, raw lattice, determinization) and
NumPy's BLAS release the GIL, so the threads really run at the same time;
the model and the graph are shared, not copied.

Why threads and not forked processes: a process forked from one that
already has threads (OpenBLAS's, a test runner's) can inherit a lock held
by a thread that does not exist in the child, and a pool of such processes
can then wait forever (it did: a worker died while the pool's task handler
waited on its queue's lock). Threads share the process; nothing here
waits on anything but a job's own result, and every job ends.

Guarantees:

- results come back in submission order, whatever order the jobs finish
  in, so the outputs are written exactly as a sequential run writes them;
- at most ``max_pending`` jobs are submitted but not handed back (Kaldi's
  --num-threads-total: it bounds the memory held by waiting results):
  :meth:`submit` waits for the oldest job first when the limit is reached;
- what a job logs (through :mod:`logging`) while it runs in a worker is
  held back and emitted by the main thread just before the job's result is
  handed back, so log lines keep the input order too;
- a job that raised re-raises its exception (with its traceback) in the
  main thread when its turn comes; :meth:`abort` (or leaving a ``with``
  block by an exception) cancels the jobs not yet started and waits for the
  running ones, which are finite, so the tool can then exit cleanly.
"""

import collections
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from ..io.files import ClosesOrAborts

__all__ = ["TaskSequencer"]


class _HeldLogs(logging.Filter):
    """A filter on the root logger's handlers: records made in a thread that
    is running a job are kept (once each, in order) instead of emitted."""

    def __init__(self):
        super().__init__()
        self.local = threading.local()

    def filter(self, record):
        held = getattr(self.local, "records", None)
        if held is None:
            return True
        if not held or held[-1] is not record:
            held.append(record)
        return False


class TaskSequencer(ClosesOrAborts):
    """``seq = TaskSequencer(num_threads, max_pending)``, then for every job
    ``for result in seq.submit(fn, *args): ...`` and at the end
    ``for result in seq.drain(): ...``; each yields the results that are due,
    in submission order. Use it as a context manager (or call :meth:`close`
    / :meth:`abort`)."""

    def __init__(self, num_threads, max_pending):
        if num_threads < 1 or max_pending < num_threads:
            raise ValueError("need 1 <= num_threads <= max_pending")
        self._executor = ThreadPoolExecutor(max_workers=num_threads,
                                            thread_name_prefix="pynnet3-job")
        self._pending = collections.deque()
        self._max_pending = max_pending
        self._held = _HeldLogs()
        self._handlers = list(logging.getLogger().handlers)
        for handler in self._handlers:
            handler.addFilter(self._held)

    def _run(self, fn, args):
        records = self._held.local.records = []
        try:
            return fn(*args), records
        except BaseException as e:
            e.held_log_records = records
            raise
        finally:
            self._held.local.records = None

    def submit(self, fn, *args):
        """Starts ``fn(*args)`` (when a thread is free) and yields the
        results that are due: the oldest ones, while the limit on pending
        jobs is reached, then those already finished at the head."""
        self._pending.append(self._executor.submit(self._run, fn, args))
        while len(self._pending) >= self._max_pending:
            yield self._next()
        while self._pending and self._pending[0].done():
            yield self._next()

    def drain(self):
        """Yields the remaining results in order (waiting for each)."""
        while self._pending:
            yield self._next()

    def _next(self):
        future = self._pending.popleft()
        try:
            result, records = future.result()
        except BaseException as e:
            self._emit(getattr(e, "held_log_records", ()))
            raise
        self._emit(records)
        return result

    @staticmethod
    def _emit(records):
        for record in records:
            logging.getLogger(record.name).handle(record)

    def close(self):
        """Waits for the jobs (after the results were taken) and stops the
        threads."""
        self._shutdown(cancel=False)

    def abort(self):
        """Cancels the jobs not started, waits for the running ones (their
        results and logs are dropped) and stops the threads."""
        self._pending.clear()
        self._shutdown(cancel=True)

    def _shutdown(self, cancel):
        try:
            self._executor.shutdown(wait=True, cancel_futures=cancel)
        finally:
            for handler in self._handlers:
                handler.removeFilter(self._held)
