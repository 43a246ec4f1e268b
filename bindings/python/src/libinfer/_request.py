"""A submitted request (Request) and the iterator over its text (Stream).

Ownership: every infer_result / infer_delta is destroyed right after it is copied into Python
objects; a request's ctypes callback object stays referenced by its Request until the request is
collected (infer_engine_wait) or the engine is destroyed, whichever comes first.
"""

import codecs
import ctypes
import threading
import time

from . import _lib
from ._types import (
    Completion,
    InferError,
    Metrics,
    TokenEvent,
    TokenLogprob,
    _reason,
    _text,
)

READ_TIMEOUT_MS = 100.0  # a blocking read wakes this often, so Ctrl-C is seen within 0.1 s

def _token_trampoline(fn, request_ref):
    def trampoline(event_p, _user):
        e = event_p.contents
        try:
            stop = fn(
                TokenEvent(
                    id=e.id,
                    token=e.token,
                    text=_text(e.text, e.text_len),
                    finished=bool(e.finished),
                    finish_reason=_reason(e.reason),
                    logprob=e.logprob,
                )
            )
            return 1 if stop else 0
        except BaseException as exc:  # noqa: BLE001  (raised from result(); cancels the request)
            r = request_ref()
            if r is not None and r._callback_error is None:
                r._callback_error = exc
            return 1

    return _lib.TOKEN_CALLBACK(trampoline)


class Request:
    """A submitted request: .id, cancel(), result(). Collected (its record freed in the engine)
    by result(); a Request dropped without result() is cancelled and collected."""

    def _setup(self, engine, rid, callback):
        self._engine = engine
        self._lib = engine._lib
        self.id = rid
        self._callback = callback  # the CFUNCTYPE the worker calls: alive until collected
        self._completion = None
        self._lock = threading.Lock()
        engine._requests.add(self)

    def cancel(self):
        """Ends the request within one step; a no-op once it ended or was collected."""
        with self._lock:
            if self._completion is not None or self._engine.closed:
                return
            self._lib.infer_engine_cancel(self._engine._handle, self.id)

    def done(self):
        """True once the request has ended."""
        if self._completion is not None:
            return True
        return self._read(0.0)[2]

    def result(self, timeout=None):
        """Waits for the end (at most timeout seconds: TimeoutError) and returns the
        Completion. Waits in short reads, so Ctrl-C interrupts it (the request goes on)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._completion is None:
            wait_ms = READ_TIMEOUT_MS
            if deadline is not None:
                left = (deadline - time.monotonic()) * 1000.0
                if left <= 0:
                    raise TimeoutError(f"request {self.id} still running after {timeout} s")
                wait_ms = min(wait_ms, left)
            if self._read(wait_ms)[2]:
                break
        completion = self._collect()
        if self._callback_error is not None:
            raise self._callback_error
        return completion

    def _read(self, timeout_ms):
        """(text bytes, ids, finished) produced since the previous read."""
        with self._lock:
            if self._completion is not None:
                return b"", [], True
            delta = _lib.DELTA_P()
            # try/finally around the calls themselves: a KeyboardInterrupt raised as a call returns
            # must not leak the delta, nor lose a result the engine already forgot.
            try:
                rc = self._lib.infer_engine_read(self._engine._live(), self.id, timeout_ms, ctypes.byref(delta))
                if rc != _lib.OK:
                    raise InferError(rc, self._engine._error(), f"read request {self.id}")
                n = ctypes.c_size_t()
                ptr = self._lib.infer_delta_text(delta, ctypes.byref(n))
                text = ctypes.string_at(ptr, n.value) if n.value else b""
                tp = self._lib.infer_delta_tokens(delta, ctypes.byref(n))
                ids = list(tp[: n.value]) if n.value else []
                finished = bool(self._lib.infer_delta_finished(delta))
            finally:
                if delta.value:
                    self._lib.infer_delta_destroy(delta)
            return text, ids, finished

    def _collect(self):
        with self._lock:
            if self._completion is not None:
                return self._completion
            lib = self._lib
            res = _lib.RESULT_P()
            rc = _lib.ERR_NOT_FOUND
            try:
                rc = lib.infer_engine_wait(self._engine._live(), self.id, ctypes.byref(res))
            finally:
                if res.value:
                    try:
                        self._completion = _completion(lib, self.id, res)
                    finally:
                        lib.infer_result_destroy(res)
                        self._callback = None
                        self._engine._requests.discard(self)
            if self._completion is None:
                raise InferError(rc, self._engine._error(), f"wait request {self.id}")
            return self._completion

    def _engine_closed(self):
        # The engine's destruction freed the record: what was produced is no longer readable.
        if self._completion is None:
            metrics = Metrics(0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0)
            self._completion = Completion(
                self.id, "", [], "cancelled", "INFER_ERR_CANCELLED", "the engine was closed", metrics
            )
        self._callback = None

    def __del__(self):
        try:
            if self._completion is None and not self._engine.closed:
                self.cancel()
                self._collect()
        except Exception:  # noqa: BLE001  (interpreter shutdown, or an id already collected)
            pass


class Stream:
    """Iterates over the text pieces of a request as they are generated. Also a context manager;
    close() cancels a request still running. .completion: the Completion once it ended."""

    def __init__(self, request):
        self.request = request
        self.completion = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def id(self):
        return self.request.id

    def __iter__(self):
        return self

    def __next__(self):
        if self.completion is not None:
            raise StopIteration
        try:
            while True:
                raw, _ids, finished = self.request._read(READ_TIMEOUT_MS)
                text = self._decoder.decode(raw, final=finished)
                if finished:
                    self.completion = self.request._collect()
                if text:
                    return text
                if finished:
                    break
        except BaseException:
            # KeyboardInterrupt, or anything else: no request is left running behind the caller.
            self.close()
            raise
        raise StopIteration

    def cancel(self):
        self.request.cancel()

    def close(self):
        """Cancels the request if it still runs and collects it; idempotent."""
        if self.completion is not None:
            return
        request = self.request
        if request._engine.closed:
            request._engine_closed()
        else:
            request.cancel()
        self.completion = request._collect()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


def _completion(lib, rid, res):
    n = ctypes.c_size_t()
    ptr = lib.infer_result_text(res, ctypes.byref(n))
    text = _text(ptr, n.value)
    count = lib.infer_result_n_tokens(res)
    tp = lib.infer_result_tokens(res)
    ids = list(tp[:count]) if count and tp else []
    m = _lib.RequestMetrics()
    m.struct_size = ctypes.sizeof(m)
    lib.infer_result_metrics(res, ctypes.byref(m))
    metrics = Metrics(
        m.queue_ms, m.ttft_ms, m.tpot_ms, m.e2e_ms, m.prompt_tokens, m.cached_tokens, m.generated_tokens, m.preemptions
    )
    status = lib.infer_result_status(res)
    completion = Completion(
        id=rid,
        text=text,
        ids=ids,
        finish_reason=_reason(lib.infer_result_finish_reason(res)),
        status=lib.infer_status_name(status).decode(),
        error=(lib.infer_result_error(res) or b"").decode("utf-8", "replace"),
        metrics=metrics,
    )
    completion.logprobs = _logprobs(lib.infer_result_logprobs, lib.infer_result_top_logprobs, res)
    completion.prompt_logprobs = _logprobs(lib.infer_result_prompt_logprobs, lib.infer_result_prompt_top_logprobs, res)
    rows, vocab = ctypes.c_size_t(), ctypes.c_size_t()
    lp = lib.infer_result_prompt_logits(res, ctypes.byref(rows), ctypes.byref(vocab))
    if lp and rows.value:
        v = vocab.value
        flat = lp[: rows.value * v]
        completion.prompt_logits = [flat[i * v : (i + 1) * v] for i in range(rows.value)]
    return completion


def _logprobs(entries_fn, top_fn, res):
    n = ctypes.c_size_t()
    entries = entries_fn(res, ctypes.byref(n))
    if not entries or n.value == 0:
        return None
    out = []
    for i in range(n.value):
        k = ctypes.c_size_t()
        top = top_fn(res, i, ctypes.byref(k))
        alts = [(top[j].token, top[j].logprob) for j in range(k.value)] if top and k.value else []
        out.append(TokenLogprob(entries[i].token, entries[i].logprob, alts))
    return out
