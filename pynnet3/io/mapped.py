"""Memory-mapped input files.

A plain file is read through a read-only mapping (:class:`MappedFile`)
instead of being copied into ``bytes``: reading one object out of a large
archive touches only that object's pages. Every page touched stays in the
process's resident memory until it is dropped, so readers drop what they
have consumed: an array copied out of the mapping, an archive entry read.

Guarantee: dropping never changes what is read. The mapping is read-only
and shared, so a dropped page that is touched again is read back from the
file (the page cache); only memory use and speed are at stake.
"""

import mmap

__all__ = ["MappedFile", "RELEASE_STEP"]

# Consumed pages are dropped in steps of at least this many bytes (one
# system call per step): a sequential reader holds at most about a step of
# the file at any time.
RELEASE_STEP = 1 << 20
_PAGE = mmap.PAGESIZE


class MappedFile(mmap.mmap):
    """A read-only memory-mapped file that can stand in for ``bytes``:
    indexing, slicing (giving bytes), ``find``, regular expressions and
    ``np.frombuffer`` work directly on the mapping; any other bytes method
    (``count``, ``decode``, ``split``...) is applied to the content.

    ``released``: the offset below which :meth:`release_behind` has dropped
    the pages (a page-aligned watermark)."""

    released = 0

    def count(self, sub, start=0, end=None):
        return self[start:end].count(sub)

    def __getattr__(self, name):
        # Only reached for attributes mmap lacks: use the bytes method.
        return getattr(self[:], name)

    def release(self, start, end):
        """Drops the pages wholly inside [start, end) from this process."""
        first = -(-start // _PAGE) * _PAGE
        last = end // _PAGE * _PAGE
        if last > first:
            try:
                self.madvise(mmap.MADV_DONTNEED, first, last - first)
            except (OSError, ValueError):
                pass            # only memory use is at stake

    def release_behind(self, pos):
        """A reader has consumed everything before ``pos``: drops those pages
        (once at least :data:`RELEASE_STEP` bytes have gathered behind the
        watermark). A reader that goes back before the watermark reads the
        file again; nothing is dropped until it passes the watermark."""
        if pos - self.released >= RELEASE_STEP:
            self.release(self.released, pos)
            self.released = pos // _PAGE * _PAGE
