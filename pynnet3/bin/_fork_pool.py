"""An ordered pool of forked worker processes, for tools that run the same
CPU-bound job on many utterances (Kaldi's TaskSequencer, with processes in
place of threads: the Cython decoder and the interpreter hold Python's GIL,
so threads would take turns instead of running at once).

The workers are forked after the tool has loaded its model and graph, so
each inherits them without copying or pickling them (copy-on-write); only a
job's arguments and its result cross a pipe. Results come back in the order
the jobs were submitted, whatever order the workers finish in, so the
outputs are written exactly as a sequential run writes them.

What a job logs (Kaldi's WARNING lines) is captured in the worker and
written to stderr by the parent just before the job's result is handed
back, so log lines keep the input order too.
"""

import collections
import io
import multiprocessing
import sys
import traceback

from ..errors import PynnetError

__all__ = ["OrderedForkPool"]

_job_function = None


def _run_job(args):
    """In a worker: runs the job with stderr captured. Returns
    (status, value, captured stderr); status "ok", "error" (a PynnetError:
    value is its message) or "bug" (value is the traceback)."""
    captured = io.StringIO()
    saved = sys.stderr
    sys.stderr = captured
    try:
        return "ok", _job_function(*args), captured.getvalue()
    except PynnetError as e:
        return "error", str(e), captured.getvalue()
    except Exception:
        return "bug", traceback.format_exc(), captured.getvalue()
    finally:
        sys.stderr = saved


class OrderedForkPool:
    """``pool = OrderedForkPool(job, num_workers, max_pending)``, then
    ``for result in pool.submit(args): ...`` after each job and
    ``for result in pool.drain(): ...`` at the end: each yields the results
    that are due, in submission order. ``job`` is a module-level or bound
    callable made before the pool (the workers inherit it by fork). At most
    ``max_pending`` jobs are submitted but not yet handed back (Kaldi's
    --num-threads-total: it bounds the memory held by waiting results). A
    job that raised re-raises in the parent (a PynnetError as PynnetError)."""

    def __init__(self, job, num_workers, max_pending):
        global _job_function
        if num_workers < 1 or max_pending < num_workers:
            raise ValueError("need 1 <= num_workers <= max_pending")
        _job_function = job
        self._pool = multiprocessing.get_context("fork").Pool(num_workers)
        self._pending = collections.deque()
        self._max_pending = max_pending

    def submit(self, args):
        self._pending.append(self._pool.apply_async(_run_job, (args,)))
        while len(self._pending) >= self._max_pending:
            yield self._next()
        while self._pending and self._pending[0].ready():
            yield self._next()

    def drain(self):
        while self._pending:
            yield self._next()

    def _next(self):
        status, value, log_text = self._pending.popleft().get()
        if log_text:
            sys.stderr.write(log_text)
            sys.stderr.flush()
        if status == "error":
            raise PynnetError(value)
        if status == "bug":
            raise RuntimeError("a worker process failed:\n" + value)
        return value

    def close(self):
        """Stops the workers (waiting for running jobs only on success)."""
        self._pool.close()
        self._pool.join()

    def terminate(self):
        self._pool.terminate()
        self._pool.join()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.terminate()
        return False
