"""Where a run's text goes and how a run is stopped: sinks that receive the
library's `print` and warning text through ctypes trampolines (tsr_output_t),
`CancelToken`, and Ctrl-C on the main thread cancelling the run in
progress."""

from __future__ import annotations

import _signal  # getsignal without signal.getsignal's enum conversion (2 us)
import codecs
import ctypes
import itertools
import os
import select
import signal
import sys
import threading
import time
from typing import Any, Callable

from . import _capi

PrintCallback = Callable[[str], Any]
ProgressCallback = Callable[[int, int], Any]
"""Receives (done, total): grid steps begun of the run's total, over all
devices and cores; see `tessera.compile`'s on_progress."""
"""Receives text: a kernel's `print` output or warning lines, in pieces (not
necessarily whole lines); with the cpu backend and several cores, from
several threads."""


class _Sink:
    """Where one run's (or one context's) text goes. C calls the trampolines
    below with the sink's token as `user`. A run's sink without an
    on_warning callback only notes that warnings came (their records are
    read from the result); a context's keeps them for CacheWarnings. A
    callback's exception is kept, the run cancelled (through `cancel`, the
    package's own flag of the run, never a user's CancelToken), and the
    exception raised after the run.

    The callbacks are called holding no lock: one may run a kernel itself
    (which prints through another sink, or this one), or block, without
    stopping the other runs' output."""

    __slots__ = ("on_print", "on_warning", "on_progress", "decoders", "error", "cancel",
                 "warned", "keep_warnings", "cache_text", "lock")

    def __init__(self, on_print: PrintCallback | None, on_warning: PrintCallback | None,
                 cancel: ctypes.c_int | None = None, keep_warnings: bool = False):
        self.on_print = on_print
        self.on_warning = on_warning
        self.on_progress: ProgressCallback | None = None
        self.decoders: dict[str, codecs.IncrementalDecoder] = {}
        self.error: BaseException | None = None
        self.cancel = cancel
        self.warned = False
        self.keep_warnings = keep_warnings
        self.cache_text: list[str] = []  # a context's warnings, issued later
        # Text may come from several cores' threads: the decoders' state and
        # `error` change under this lock, the callbacks run outside it.
        self.lock = threading.Lock()

    def reset(self, on_print: PrintCallback | None, on_warning: PrintCallback | None) -> None:
        self.on_print = on_print
        self.on_warning = on_warning
        self.on_progress = None
        self.error = None
        self.warned = False
        if self.decoders:
            self.decoders.clear()

    def write(self, stream: str, data: bytes) -> None:
        if stream == "print":
            fn = self.on_print
        else:
            self.warned = True
            fn = self.on_warning
            if fn is None and not self.keep_warnings:
                return  # the result's records become KernelWarnings
        with self.lock:
            decoder = self.decoders.get(stream)
            if decoder is None:
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                self.decoders[stream] = decoder
            text = decoder.decode(data)
            if not text or self.error is not None:
                return
            if fn is None and stream != "print":
                self.cache_text.append(text)
                return
        try:
            if fn is not None:
                fn(text)
            else:
                sys.stdout.write(text)
        except BaseException as e:  # raised again after the run
            self._fail(e)


    def progress(self, done: int, total: int) -> None:
        # The library makes these calls one at a time, never overlapping.
        fn = self.on_progress
        if fn is None or self.error is not None:
            return
        try:
            fn(done, total)
        except BaseException as e:  # raised again after the run
            self._fail(e)

    def _fail(self, e: BaseException) -> None:
        """A callback raised: the run stops (its cancel flag) and the first
        exception is raised again after it."""
        with self.lock:
            if self.error is None:
                self.error = e
        if self.cancel is not None:
            self.cancel.value = 1


_sinks: dict[int, _Sink] = {}
_sink_ids = itertools.count(1)


def _trampoline(stream: str) -> Any:
    def on_text(user: int | None, text: Any, size: int) -> None:
        sink = _sinks.get(user or 0)
        if sink is not None:
            sink.write(stream, ctypes.string_at(text, size))
    return _capi.OUTPUT_FN(on_text)


def _on_progress(user: int | None, done: int, total: int) -> None:
    sink = _sinks.get(user or 0)
    if sink is not None:
        sink.progress(done, total)


# Kept alive for the life of the process: C holds these pointers.
_PRINT_TRAMPOLINE = _trampoline("print")
_WARNING_TRAMPOLINE = _trampoline("warning")
_PROGRESS_TRAMPOLINE = _capi.PROGRESS_FN(_on_progress)


class ProgressLine:
    """`on_progress=True`: tessera run's progress line on stderr (grid
    step/total, steps per second, ETA), redrawn in place once a run has
    taken `after` seconds and erased at its end; only when stderr is a
    terminal and not under pytest (PYTEST_CURRENT_TEST set), so logs and
    test output stay clean."""

    def __init__(self, after: float = 1.0, stream: Any = None):
        self.after = after
        self.stream = stream
        self.start = time.monotonic()
        self.shown = False

    @staticmethod
    def wanted(stream: Any = None) -> bool:
        stream = stream if stream is not None else sys.stderr
        if os.environ.get("PYTEST_CURRENT_TEST"):
            return False
        try:
            return bool(stream.isatty())
        except (AttributeError, ValueError):
            return False

    def __call__(self, done: int, total: int) -> None:
        t = time.monotonic() - self.start
        if t < self.after or done >= total:
            return
        rate = done / t if t > 0 else 0.0
        eta = f"{(total - done) / rate:.0f}s" if rate > 0 else "?"
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(f"\r\033[Ktessera: grid step {done}/{total} ({100 * done // max(total, 1)}%), "
                     f"{rate:,.0f} steps/s, ETA {eta}")
        stream.flush()
        self.shown = True

    def end(self) -> None:
        if self.shown:
            stream = self.stream if self.stream is not None else sys.stderr
            stream.write("\r\033[K")
            stream.flush()


def _register(sink: _Sink) -> int:
    token = next(_sink_ids)
    _sinks[token] = sink
    return token


# ---- cancellation -----------------------------------------------------------------------


class CancelToken:
    """`cancel()` from another thread stops the runs given `cancel=token`
    soon after, with a KernelError whose diagnostic says "run stopped:
    cancelled"; a run started with a cancelled token stops at once. Only
    `cancel()` sets it (not a callback's exception, not Ctrl-C, which stop
    their own run). Reusable after `reset()`."""

    def __init__(self) -> None:
        self._set = False
        # The flags of the runs using the token (each run polls a flag of
        # the package's own, so that what else stops a run leaves the token
        # alone), keyed by id.
        self._runs: dict[int, ctypes.c_int] = {}
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Asks the runs using this token to stop."""
        with self._lock:
            self._set = True
            for flag in self._runs.values():
                flag.value = 1

    def reset(self) -> None:
        """Lets later runs with the token run (runs it stopped stay stopped)."""
        with self._lock:
            self._set = False

    @property
    def cancelled(self) -> bool:
        return self._set

    def _attach(self, flag: ctypes.c_int) -> None:
        """A run polling `flag` starts with this token."""
        with self._lock:
            self._runs[id(flag)] = flag
            if self._set:
                flag.value = 1

    def _detach(self, flag: ctypes.c_int) -> None:
        with self._lock:
            self._runs.pop(id(flag), None)


class _Interrupts:
    """Ctrl-C during a run on the main thread: Python's C-level signal
    handler writes the signal number to the wakeup fd even while the main
    thread is inside the C call; a watcher thread reading it sets the cancel
    flag of the run in progress, the run stops ("run stopped: cancelled"),
    and Python raises KeyboardInterrupt when the call returns.

    Our wakeup fd stays installed between runs, unless another is found
    there (an asyncio loop's): then that one is put back and runs are not
    armed. Only when SIGINT has Python's default handler: otherwise Ctrl-C
    waits for the run's end.

    A Ctrl-C between runs (at a prompt, in an `except KeyboardInterrupt`)
    also writes to the fd; Python raised its KeyboardInterrupt then, and it
    is not for the next run. So the watcher only waits in poll() without the
    lock, then reads and acts under `lock`, and `arm` drops what the pipe
    holds under the same lock before it sets the run's flag: a byte read
    after that came during the run."""

    def __init__(self) -> None:
        self.current: ctypes.c_int | None = None  # the main thread's run's flag
        self.read_fd = self.write_fd = -1
        self.started = False
        self.main = threading.main_thread().ident
        self.checked = -1.0  # time.monotonic() of the last check of the wakeup fd
        self.ours = False
        self.lock = threading.Lock()
        self.pending: Any = None  # arm's select.poll of read_fd (the main thread's)
        self.direct = False  # the main thread's direct runs (tsr_xla_bind) are watched

    def _start(self) -> bool:
        if not self.started:
            try:
                r, w = os.pipe()
                os.set_blocking(w, False)
                os.set_blocking(r, False)
            except OSError:
                return False
            self.read_fd, self.write_fd = r, w
            self.pending = select.poll()
            self.pending.register(r, select.POLLIN)
            threading.Thread(target=self._watch, name="tessera-interrupts",
                             daemon=True).start()
            self.started = True
        return True

    def _drain(self) -> bytes | None:
        """What the pipe holds (under `lock`); None once it is closed."""
        data = b""
        while True:
            try:
                chunk = os.read(self.read_fd, 64)
            except BlockingIOError:
                return data
            except OSError:
                return None
            if not chunk:
                return None
            data += chunk

    def _watch(self) -> None:
        ready = select.poll()  # its own: a poll object is not for two threads
        ready.register(self.read_fd, select.POLLIN)
        while True:
            try:
                ready.poll()
            except OSError:
                return
            with self.lock:
                data = self._drain()
                if data is None:
                    return
                flag = self.current
                if signal.SIGINT in data:
                    if flag is not None:
                        flag.value = 1
                    elif self.direct:  # the library's own run, if one is going on
                        _capi.lib().tsr_xla_interrupt()

    def watch_direct_runs(self) -> None:
        """Ctrl-C also cancels the main thread's runs that the library makes
        without Python (tsr_xla_bind's direct runs: their cancel flag is the
        library's), as far as our wakeup fd stays installed. From the main
        thread only (set_wakeup_fd's rule); elsewhere it does nothing."""
        if self.direct or not self._ours():
            return
        _capi.lib().tsr_xla_set_interrupt_thread(self.main)
        self.direct = True

    def _ours(self) -> bool:
        """Whether Ctrl-C reaches our watcher (installing it if it can)."""
        if threading.get_ident() != self.main or \
                _signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        now = time.monotonic()
        if now - self.checked > 0.1:
            # Is our wakeup fd (still) there? set_wakeup_fd is the only way
            # to ask, and costs 1.4 us: done at most every 0.1 s. Between two
            # checks another one may have been set; then a run is not
            # cancelled by Ctrl-C (the other's owner gets the signal), but
            # another fd is never replaced.
            self.checked = now
            self.ours = False
            if not self.started and not self._start():
                return False
            try:
                old = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
            except (ValueError, OSError):
                return False
            if old != -1 and old != self.write_fd:
                signal.set_wakeup_fd(old)  # someone else's (asyncio): leave it
                return False
            self.ours = True
        return self.ours

    def arm(self, flag: ctypes.c_int) -> bool:
        """Arms Ctrl-C for a run on this thread; False when it cannot be."""
        if not self._ours():
            return False
        with self.lock:
            if self.pending.poll(0):
                self._drain()  # a Ctrl-C of before this run
            self.current = flag
        return True

    def disarm(self) -> None:
        # Under the lock: once this returns, the watcher no longer sets the
        # flag (which the run's slot reuses).
        with self.lock:
            self.current = None


_interrupts = _Interrupts()
