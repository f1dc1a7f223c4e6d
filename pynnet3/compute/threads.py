"""A computer's own threads: with BLAS arithmetic on several cores, the
network computers run whole computations on threads of their own, each
with single-threaded BLAS, instead of spreading every product over BLAS
threads (which spin and wait at the end of every product).

:class:`ComputerThreads` starts its workers when first asked and numbers
them 1 .. ``num_threads``, so that a computer can give each its own
execution plans and matrices (:meth:`ComputerThreads.current`; 0 on any
other thread). Computations are compiled on the calling thread: the
compiler is not thread-safe.
"""

import concurrent.futures
import itertools
import threading

from . import blas_threads as blas_control

__all__ = ["ComputerThreads"]


class ComputerThreads:
    """``num_threads`` worker threads for one computer, started on the first
    :meth:`submit` or :meth:`map`. Each job runs with BLAS single-threaded
    (the threads are the parallelism). :meth:`close` cancels the jobs not
    yet started and waits for the running ones; the object can then be
    used again (it starts new workers)."""

    __slots__ = ("num_threads", "name", "_local", "_pool")

    def __init__(self, num_threads, name):
        self.num_threads = num_threads
        self.name = name
        self._local = threading.local()
        self._pool = None

    def current(self):
        """The calling thread's number: 1 .. num_threads on a worker, else 0."""
        return getattr(self._local, "thread", 0)

    def submit(self, fn, *args):
        """A future of ``fn(*args)``, run on a worker."""
        return self._executor().submit(self._single_threaded_blas, fn, *args)

    def map(self, fn, items):
        """``fn(item)`` for each item, on the workers, in order."""
        return self._executor().map(lambda item: self._single_threaded_blas(fn, item), items)

    def close(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _single_threaded_blas(fn, *args):
        with blas_control.single_threaded():
            return fn(*args)

    def _executor(self):
        if self._pool is None:
            counter = itertools.count(1)

            def name_thread():
                self._local.thread = next(counter)

            self._pool = concurrent.futures.ThreadPoolExecutor(
                self.num_threads, thread_name_prefix=self.name, initializer=name_thread)
        return self._pool
