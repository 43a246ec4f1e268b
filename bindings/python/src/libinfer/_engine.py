"""The Engine (infer_engine) and the module-level functions of the C API."""

import atexit
import ctypes
import json
import weakref

from . import _lib
from ._request import Request, Stream, _token_trampoline
from ._types import EngineStats, InferError, LatencyStats, ModelInfo

_KV_TYPES = {"f16": 0, "f32": 1, "bf16": 2, "q8_0": 3, "fp8": 4}
_WEIGHT_TYPES = {"keep": 0, "q8_0": 1, "q4_0": 2, "int8": 3, "fp8": 4, "fp8-tensor": 5, "int4": 6, "fp8-dynamic": 7, "w8a16": 8}


def _guess(n):
    """The first buffer size of the two-call protocols for an input of n bytes or tokens; a
    second call gets the size the library reports when this is too small."""
    return n + 16


def _init_struct(cls, init_sized):
    """A defaults-filled struct of this binding's size: the library writes no further than the
    size it is given, whatever its own version."""
    s = cls()
    init_sized(ctypes.byref(s), ctypes.sizeof(cls))
    return s


def chat_template_names():
    """The chat formats Engine(chat_template=...) accepts ("chatml", "gemma", ...)."""
    lib = _lib.load()
    names, i = [], 0
    while True:
        n = lib.infer_chat_template_name(i)
        if n is None:
            return names
        names.append(n.decode())
        i += 1


def library_version():
    """The loaded libinfer's version, "MAJOR.MINOR.PATCH"."""
    return _lib.load().infer_version().decode()


def cuda_device_count():
    """CUDA devices the loaded libinfer can use: 0 when it was built without CUDA, or when the
    machine has no GPU or no driver."""
    return int(_lib.load().infer_cuda_device_count())


def cpu_isa():
    """The instruction set the loaded libinfer's CPU kernels run: "scalar", "avx2", "avxvnni" or
    "avx512" (the best the CPU has, lowered by the environment variable INFER_CPU_ISA)."""
    return _lib.load().infer_cpu_isa().decode()


_log_callback = None  # the CFUNCTYPE object the library holds; kept alive here
_engines = weakref.WeakSet()  # open engines, closed at exit


@atexit.register
def _close_all():
    # Before the interpreter finalizes: a library thread that calls into Python after that (a
    # token, progress or log callback) would be killed inside the library's C++ and abort.
    for engine in list(_engines):
        try:
            engine.close()
        except Exception:  # noqa: BLE001
            pass
    if _log_callback is not None:
        set_log_callback(None)


def set_log_callback(fn):
    """Routes libinfer's log messages to fn(level: int, message: str), called from any library
    thread; None restores the default (stderr)."""
    global _log_callback
    lib = _lib.load()
    if fn is None:
        lib.infer_log_set_callback(ctypes.cast(None, _lib.LOG_CALLBACK), None)
        _log_callback = None
        return

    def trampoline(level, message, _user):
        try:
            fn(level, message.decode("utf-8", errors="replace"))
        except Exception:  # noqa: BLE001  (nothing may propagate into the library's thread)
            pass

    cb = _lib.LOG_CALLBACK(trampoline)
    lib.infer_log_set_callback(cb, None)
    _log_callback = cb


def set_log_level(level):
    """Drops library log messages below level: 0 debug, 1 info, 2 warn (default), 3 error, or
    those names."""
    names = {"debug": 0, "info": 1, "warn": 2, "warning": 2, "error": 3}
    code = names[level.lower()] if isinstance(level, str) else int(level)
    rc = _lib.load().infer_log_set_level(code)
    if rc != _lib.OK:
        raise InferError(rc, f"log level {level!r} out of range", "set_log_level")


def _message_dict(m):
    """A message as the JSON object of a conversation: a dict as it is, a pair as role and content."""
    if isinstance(m, dict):
        return dict(m)
    role, content = m
    return {"role": str(role), "content": str(content)}


def _messages_array(messages):
    """(ctypes array, keep-alive bytes) from dicts {"role","content"} or (role, content) pairs."""
    pairs = []
    for m in messages:
        if isinstance(m, dict):
            role, content = m["role"], m["content"]
        else:
            role, content = m
        pairs.append((str(role).encode(), str(content).encode()))
    arr = (_lib.ChatMessage * max(len(pairs), 1))()
    for i, (r, c) in enumerate(pairs):
        arr[i].role = r
        arr[i].content = c
    return arr, len(pairs), pairs


_SAMPLING = (
    "max_tokens",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "repeat_last_n",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "ignore_eos",
    "logprobs",
    "top_logprobs",
    "prompt_logprobs_from",
    "prompt_top_logprobs",
    "prompt_logits",
    "priority",
    "timeout_ms",
    "add_special",
    "parse_special",
)


class Engine:
    """A loaded model serving requests (infer_engine). Every knob defaults to the library's
    (capi/include/infer.h, docs/tuning.md); kv_type is "f16", "f32", "bf16", "q8_0" or "fp8", weight_type "keep",
    "q8_0", "q4_0", "int8", "w8a16", "fp8", "fp8-tensor", "fp8-dynamic" or "int4", device "cpu", "cuda" or "cuda:N", on_load_progress a
    callable receiving the fraction loaded.

    Thread-safe like the C engine: any number of threads may generate, stream and submit at once.
    close() (or leaving the with block) cancels what is in flight; it must not race other calls.
    Raises LibraryNotFound when libinfer cannot be loaded, InferError when the model cannot."""

    def __init__(
        self,
        model_path,
        threads=None,
        *,
        max_batch_tokens=None,
        max_sequences=None,
        max_waiting=None,
        batch_wait_ms=None,
        kv_cache_bytes=None,
        kv_cache_tokens=None,
        block_size=None,
        kv_type=None,
        weight_type=None,
        max_context=None,
        prefix_cache=None,
        priority_preemption=None,
        price_per_hour=None,
        metrics_window=None,
        chat_template=None,
        chat_template_text=None,
        chat_template_variables=None,
        device=None,
        on_load_progress=None,
    ):
        self._handle = None
        self._requests = weakref.WeakSet()
        self._lib = lib = _lib.load()
        p = _init_struct(_lib.EngineParams, lib.infer_engine_params_init_sized)
        path = str(model_path).encode()
        p.model_path = path
        ints = {
            "n_threads": threads,
            "max_batch_tokens": max_batch_tokens,
            "max_sequences": max_sequences,
            "max_waiting": max_waiting,
            "kv_cache_bytes": kv_cache_bytes,
            "kv_cache_tokens": kv_cache_tokens,
            "block_size": block_size,
            "max_context": max_context,
            "metrics_window": metrics_window,
        }
        for field, value in ints.items():
            if value is not None:
                setattr(p, field, _as_int(value, field if field != "n_threads" else "threads"))
        if batch_wait_ms is not None:
            p.batch_wait_ms = float(batch_wait_ms)
        if price_per_hour is not None:
            p.price_per_hour = float(price_per_hour)
        if prefix_cache is not None:
            p.prefix_cache = 1 if prefix_cache else 0
        if priority_preemption is not None:
            p.priority_preemption = 1 if priority_preemption else 0
        if kv_type is not None:
            p.kv_type = _choice(kv_type, _KV_TYPES, "kv_type")
        if weight_type is not None:
            p.weight_type = _choice(weight_type, _WEIGHT_TYPES, "weight_type")
        template = template_text = template_vars = device_name = None
        if device is not None:
            if not isinstance(device, str):
                raise TypeError("device must be a str: 'cpu', 'cuda' or 'cuda:N'")
            device_name = device.encode()
            p.device = device_name
        if chat_template is not None:
            template = str(chat_template).encode()
            p.chat_template = template
        if chat_template_text is not None:
            template_text = str(chat_template_text).encode()
            p.chat_template_text = template_text
        if chat_template_variables is not None:
            template_vars = json.dumps(dict(chat_template_variables)).encode()
            p.chat_template_variables = template_vars
        progress = None
        if on_load_progress is not None:
            if not callable(on_load_progress):
                raise TypeError("on_load_progress must be callable")
            errors = []

            def trampoline(fraction, _user):
                if errors:
                    return
                try:
                    on_load_progress(float(fraction))
                except BaseException as e:  # noqa: BLE001  (raised again after create returns)
                    errors.append(e)

            progress = _lib.PROGRESS_CALLBACK(trampoline)
            p.on_load_progress = progress
        handle = _lib.ENGINE_P()
        rc = lib.infer_engine_create(ctypes.byref(p), ctypes.byref(handle))
        if rc != _lib.OK:
            raise InferError(rc, lib.infer_last_error().decode("utf-8", "replace"), f"Engine({model_path!r})")
        self._handle = handle
        _engines.add(self)
        if progress is not None and errors:
            self.close()
            raise errors[0]

    # ---- lifetime ---------------------------------------------------------------------------

    def close(self):
        """Cancels what is in flight and frees the engine; idempotent. Requests not yet collected
        end with finish_reason "cancelled" as far as their result() is concerned."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        live = list(self._requests)
        self._lib.infer_engine_destroy(handle)
        for r in live:
            r._engine_closed()

    def shutdown(self, finish_in_flight=True):
        """Stops accepting requests; finishes (or cancels) what is queued and running, and
        returns when the worker is idle. Later submits fail with INFER_ERR_CANCELLED."""
        rc = self._lib.infer_engine_shutdown(self._live(), 1 if finish_in_flight else 0)
        self._check(rc, "shutdown")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    @property
    def closed(self):
        return self._handle is None

    def _live(self):
        if self._handle is None:
            raise InferError(_lib.ERR_INVALID_ARGUMENT, "the engine is closed")
        return self._handle

    def _error(self):
        return self._lib.infer_engine_error(self._handle).decode("utf-8", "replace")

    def _check(self, rc, what):
        if rc != _lib.OK:
            raise InferError(rc, self._error(), what)

    # ---- requests ---------------------------------------------------------------------------

    def submit(self, prompt=None, *, messages=None, stop=None, on_token=None, **params):
        """Queues a request and returns its Request handle at once. prompt: a str or a list of
        token ids; or messages= a conversation. Sampling parameters as for generate().
        on_token(TokenEvent) runs on the engine's worker for every token and once at the end;
        returning a true value cancels the request."""
        unknown = set(params) - set(_SAMPLING)
        if unknown:
            raise TypeError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        lib = self._lib
        rp = _init_struct(_lib.RequestParams, lib.infer_request_params_init_sized)
        keep = []  # what the params point at, alive until submit returns
        if (prompt is None) == (messages is None):
            raise TypeError("give exactly one of prompt and messages")
        if messages is not None:
            arr, n, strings = _messages_array(messages)
            keep += [arr, strings]
            rp.messages, rp.n_messages = ctypes.cast(arr, ctypes.POINTER(_lib.ChatMessage)), n
        elif isinstance(prompt, (str, bytes)):
            b = prompt.encode() if isinstance(prompt, str) else prompt
            keep.append(b)
            rp.prompt = b
        else:
            ids = [_as_int(t, "prompt token") for t in prompt]
            arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
            keep.append(arr)
            rp.prompt_tokens, rp.n_prompt_tokens = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32)), len(ids)
        for name, value in params.items():
            if value is None:
                continue
            ctype = dict(_lib.RequestParams._fields_)[name]
            if ctype in (ctypes.c_float, ctypes.c_double):
                setattr(rp, name, float(value))
            elif isinstance(value, bool):
                setattr(rp, name, int(value))
            else:
                setattr(rp, name, _as_int(value, name))
        if stop is not None:
            if isinstance(stop, str):
                stop = [stop]
            encoded = [s.encode() for s in stop]
            arr = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
            keep += [encoded, arr]
            rp.stop, rp.n_stop = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), len(encoded)
        request = Request.__new__(Request)
        request._callback_error = None  # the worker may call back before submit returns
        callback = None
        if on_token is not None:
            callback = _token_trampoline(on_token, weakref.ref(request))
            rp.on_token = callback
        rid = ctypes.c_uint64()
        rc = lib.infer_engine_submit(self._live(), ctypes.byref(rp), ctypes.byref(rid))
        self._check(rc, "submit")
        request._setup(self, rid.value, callback)
        return request

    def generate(self, prompt=None, **params):
        """Runs a request to its end and returns its Completion. Parameters (None = the library's
        default): max_tokens, temperature (0 = greedy), top_k, top_p, min_p, repeat_penalty,
        repeat_last_n, frequency_penalty, presence_penalty, seed, stop (list of str), ignore_eos,
        logprobs, top_logprobs, prompt_logprobs_from, prompt_top_logprobs, prompt_logits,
        priority, timeout_ms, add_special, parse_special; messages= instead of prompt for a chat.
        Ctrl-C (KeyboardInterrupt) cancels the request before it propagates."""
        request = self.submit(prompt, **params)
        try:
            return request.result()
        except BaseException:
            request.cancel()
            request._collect()
            raise

    def stream(self, prompt=None, **params):
        """Submits a request and returns a Stream that yields its text as it is generated (the
        pieces concatenate to generate()'s text). Breaking out of the loop, closing the stream or
        Ctrl-C cancels the request; after the end, stream.completion has the whole Completion."""
        return Stream(self.submit(prompt, **params))

    def chat(self, messages, **params):
        """generate() on a conversation: messages are {"role", "content"} dicts or (role, content)
        pairs, rendered with the chat template; the answer also ends at the end of turn."""
        return self.generate(messages=messages, **params)

    def stream_chat(self, messages, **params):
        return self.stream(messages=messages, **params)

    # ---- text -------------------------------------------------------------------------------

    def tokenize(self, text, add_special=True, parse_special=True):
        """Token ids of text as a prompt would be tokenized."""
        b = text.encode() if isinstance(text, str) else bytes(text)
        n = ctypes.c_size_t()
        capacity = _guess(len(b))
        while True:
            buf = (ctypes.c_int32 * capacity)()
            rc = self._lib.infer_engine_tokenize(
                self._live(), b, len(b), int(bool(add_special)), int(bool(parse_special)), buf, capacity, ctypes.byref(n)
            )
            if rc == _lib.ERR_OUT_OF_RANGE and n.value > capacity:
                capacity = n.value
                continue
            self._check(rc, "tokenize")
            return list(buf[: n.value])

    def detokenize(self, ids, render_special=False):
        """The text of token ids (special tokens as their text when render_special)."""
        ids = [_as_int(t, "token") for t in ids]
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        return self._sized_text(
            lambda buf, cap, n: self._lib.infer_engine_detokenize(
                self._live(), arr, len(ids), int(bool(render_special)), buf, cap, n
            ),
            "detokenize",
            _guess(len(ids) * 4),
        )

    def apply_chat_template(self, messages, add_generation_prompt=True, **variables):
        """The conversation as the engine's chat template renders it (what chat() tokenizes):
        the model's Jinja template as transformers renders it. messages are (role, content)
        pairs or dicts; dicts may carry more (tool_calls, ...), and keyword arguments become
        template variables (tools=[...], enable_thinking=False), as in transformers."""
        if variables or any(isinstance(m, dict) and set(m) - {"role", "content"} for m in messages):
            conversation = {"messages": [_message_dict(m) for m in messages],
                            "add_generation_prompt": bool(add_generation_prompt), **variables}
            text = json.dumps(conversation, ensure_ascii=False).encode()
            return self._sized_text(
                lambda buf, cap, ln: self._lib.infer_engine_apply_chat_template_json(self._live(), text, buf, cap, ln),
                "apply_chat_template",
                _guess(len(text) * 2 + 256),
            )
        arr, n, _strings = _messages_array(messages)
        return self._sized_text(
            lambda buf, cap, ln: self._lib.infer_engine_apply_chat_template(
                self._live(), arr, n, int(bool(add_generation_prompt)), buf, cap, ln
            ),
            "apply_chat_template",
            _guess(sum(len(r) + len(c) + 32 for r, c in _strings)),
        )

    def _sized_text(self, call, what, guess):
        """The two-call protocol: try a guessed buffer, then one of the size the library said."""
        length = ctypes.c_size_t()
        capacity = guess
        while True:
            buf = ctypes.create_string_buffer(capacity) if capacity else None
            rc = call(buf, capacity, ctypes.byref(length))
            if rc == _lib.ERR_OUT_OF_RANGE and length.value + 1 > capacity:
                capacity = length.value + 1
                continue
            self._check(rc, what)
            return buf.raw[: length.value].decode("utf-8", errors="replace") if buf else ""

    # ---- figures ----------------------------------------------------------------------------

    def stats(self):
        """An EngineStats of every infer_engine_stats field."""
        s = _lib.EngineStats()
        s.struct_size = ctypes.sizeof(s)
        self._check(self._lib.infer_engine_get_stats(self._live(), ctypes.byref(s)), "stats")
        values = {}
        for name, ftype in _lib.EngineStats._fields_:
            if name == "struct_size":
                continue
            v = getattr(s, name)
            if ftype is _lib.Latency:
                v = LatencyStats(v.p50, v.p95, v.p99, v.mean, v.count)
            values[name] = v
        return EngineStats(**values)

    def model_info(self):
        """A ModelInfo of the served model."""
        m = _lib.ModelInfo()
        m.struct_size = ctypes.sizeof(m)
        self._check(self._lib.infer_engine_model_info(self._live(), ctypes.byref(m)), "model_info")
        values = {}
        for name, _t in _lib.ModelInfo._fields_:
            if name == "struct_size":
                continue
            v = getattr(m, name)
            values[name] = (v or b"").decode("utf-8", "replace") if isinstance(v, (bytes, type(None))) else v
        return ModelInfo(**values)


def _as_int(value, name):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    return value.__index__()


def _choice(value, table, name):
    if isinstance(value, str) and value.lower() in table:
        return table[value.lower()]
    raise ValueError(f"{name} must be one of {', '.join(table)}, got {value!r}")
