"""Finding libinfer.so and declaring the C API of capi/include/infer.h for ctypes.

Every struct mirrors the header field for field; every function gets argtypes and restype. The
library is loaded on first use (libinfer.load_library(), Engine(...)), not at import, so that
`import libinfer` works on a machine without it and the failure names every place looked at.
"""

import ctypes
import ctypes.util
import glob
import os
import sys
import sysconfig
import threading

# The ABI this binding speaks: libinfer.so.<ABI_VERSION> (CMakeLists.txt's INFER_ABI_VERSION).
ABI_VERSION = 0

c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_int32 = ctypes.c_int32
c_int64 = ctypes.c_int64
c_uint64 = ctypes.c_uint64
c_float = ctypes.c_float
c_double = ctypes.c_double
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
POINTER = ctypes.POINTER

# ---- Callbacks --------------------------------------------------------------------------------

LOG_CALLBACK = ctypes.CFUNCTYPE(None, c_int, c_char_p, c_void_p)
PROGRESS_CALLBACK = ctypes.CFUNCTYPE(None, c_float, c_void_p)


class TokenEventStruct(ctypes.Structure):
    # Owned by the library and possibly longer in later versions: only read through a pointer.
    _fields_ = [
        ("id", c_uint64),
        ("token", c_int32),
        ("text", c_char_p),
        ("text_len", c_size_t),
        ("finished", c_int),
        ("reason", c_int),
        ("logprob", ctypes.c_double),
    ]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(c_int, POINTER(TokenEventStruct), c_void_p)

# ---- Structs ----------------------------------------------------------------------------------


class EngineParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("model_path", c_char_p),
        ("n_threads", c_int32),
        ("max_batch_tokens", c_int64),
        ("max_sequences", c_int32),
        ("max_waiting", c_int32),
        ("batch_wait_ms", c_double),
        ("kv_cache_bytes", c_uint64),
        ("kv_cache_tokens", c_int64),
        ("block_size", c_int32),
        ("kv_type", c_int32),
        ("weight_type", c_int32),
        ("max_context", c_int64),
        ("prefix_cache", c_int32),
        ("price_per_hour", c_double),
        ("metrics_window", c_int32),
        ("chat_template", c_char_p),
        ("on_load_progress", PROGRESS_CALLBACK),
        ("progress_user_data", c_void_p),
        ("priority_preemption", c_int32),
        ("chat_template_text", c_char_p),
        ("chat_template_variables", c_char_p),
        ("device", c_char_p),
    ]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p)]


class RequestParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("prompt", c_char_p),
        ("prompt_tokens", POINTER(c_int32)),
        ("n_prompt_tokens", c_size_t),
        ("messages", POINTER(ChatMessage)),
        ("n_messages", c_size_t),
        ("add_special", c_int32),
        ("parse_special", c_int32),
        ("max_tokens", c_int64),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int32),
        ("frequency_penalty", c_float),
        ("presence_penalty", c_float),
        ("stop", POINTER(c_char_p)),
        ("n_stop", c_size_t),
        ("seed", c_uint64),
        ("ignore_eos", c_int32),
        ("logprobs", c_int32),
        ("top_logprobs", c_int32),
        ("prompt_logprobs_from", c_int64),
        ("prompt_top_logprobs", c_int32),
        ("prompt_logits", c_int32),
        ("priority", c_int32),
        ("timeout_ms", c_double),
        ("on_token", TOKEN_CALLBACK),
        ("user_data", c_void_p),
        ("detached", c_int32),
    ]


class RequestMetrics(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("queue_ms", c_double),
        ("ttft_ms", c_double),
        ("tpot_ms", c_double),
        ("e2e_ms", c_double),
        ("prompt_tokens", c_int64),
        ("cached_tokens", c_int64),
        ("generated_tokens", c_int64),
        ("preemptions", c_int64),
    ]


class TokenLogprobStruct(ctypes.Structure):
    _fields_ = [("token", c_int32), ("logprob", ctypes.c_double)]


class Latency(ctypes.Structure):
    _fields_ = [("p50", c_double), ("p95", c_double), ("p99", c_double), ("mean", c_double), ("count", c_int64)]


class EngineStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("uptime_s", c_double),
        ("running", c_int64),
        ("waiting", c_int64),
        ("requests_finished", c_int64),
        ("requests_cancelled", c_int64),
        ("requests_failed", c_int64),
        ("requests_rejected", c_int64),
        ("prompt_tokens", c_int64),
        ("computed_prompt_tokens", c_int64),
        ("cached_prompt_tokens", c_int64),
        ("generated_tokens", c_int64),
        ("prompt_tokens_per_s", c_double),
        ("generated_tokens_per_s", c_double),
        ("prefix_hit_rate", c_double),
        ("preemptions", c_int64),
        ("steps", c_int64),
        ("kv_blocks_total", c_int64),
        ("kv_blocks_used", c_int64),
        ("kv_blocks_cached", c_int64),
        ("kv_blocks_free", c_int64),
        ("tokenize_ms", c_double),
        ("schedule_ms", c_double),
        ("forward_ms", c_double),
        ("sample_ms", c_double),
        ("detokenize_ms", c_double),
        ("ttft_ms", Latency),
        ("tpot_ms", Latency),
        ("e2e_ms", Latency),
        ("queue_ms", Latency),
        ("cost_per_million_tokens", c_double),
        ("n_threads", c_int32),
    ]


class ModelInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("architecture", c_char_p),
        ("name", c_char_p),
        ("chat_template", c_char_p),
        ("n_vocab", c_int64),
        ("n_ctx", c_int64),
        ("n_ctx_train", c_int64),
        ("n_embd", c_int64),
        ("n_layer", c_int64),
        ("n_head", c_int64),
        ("n_head_kv", c_int64),
        ("n_params", c_int64),
        ("size_bytes", c_uint64),
        ("bos", c_int32),
        ("eos", c_int32),
        ("eot", c_int32),
        ("file_type", c_char_p),
        ("default_temperature", c_float),
        ("default_top_k", c_int32),
        ("default_top_p", c_float),
    ]


# Opaque handles travel as void pointers.
ENGINE_P = c_void_p
DELTA_P = c_void_p
RESULT_P = c_void_p

# name: (restype, argtypes); infer_status and the other enums are C ints.
_FUNCTIONS = {
    "infer_version": (c_char_p, []),
    "infer_version_number": (c_int, []),
    "infer_cuda_device_count": (c_int, []),
    "infer_cpu_isa": (c_char_p, []),
    "infer_status_name": (c_char_p, [c_int]),
    "infer_log_set_callback": (None, [LOG_CALLBACK, c_void_p]),
    "infer_log_set_level": (c_int, [c_int]),
    "infer_last_error": (c_char_p, []),
    "infer_engine_error": (c_char_p, [ENGINE_P]),
    "infer_engine_params_init_sized": (None, [POINTER(EngineParams), c_size_t]),
    "infer_engine_create": (c_int, [POINTER(EngineParams), POINTER(ENGINE_P)]),
    "infer_engine_destroy": (None, [ENGINE_P]),
    "infer_engine_shutdown": (c_int, [ENGINE_P, c_int]),
    "infer_finish_reason_name": (c_char_p, [c_int]),
    "infer_request_params_init_sized": (None, [POINTER(RequestParams), c_size_t]),
    "infer_engine_submit": (c_int, [ENGINE_P, POINTER(RequestParams), POINTER(c_uint64)]),
    "infer_engine_cancel": (c_int, [ENGINE_P, c_uint64]),
    "infer_engine_read": (c_int, [ENGINE_P, c_uint64, c_double, POINTER(DELTA_P)]),
    "infer_delta_text": (POINTER(ctypes.c_char), [DELTA_P, POINTER(c_size_t)]),
    "infer_delta_tokens": (POINTER(c_int32), [DELTA_P, POINTER(c_size_t)]),
    "infer_delta_finished": (c_int, [DELTA_P]),
    "infer_delta_finish_reason": (c_int, [DELTA_P]),
    "infer_delta_destroy": (None, [DELTA_P]),
    "infer_engine_wait": (c_int, [ENGINE_P, c_uint64, POINTER(RESULT_P)]),
    "infer_engine_generate": (c_int, [ENGINE_P, POINTER(RequestParams), POINTER(RESULT_P)]),
    "infer_result_text": (POINTER(ctypes.c_char), [RESULT_P, POINTER(c_size_t)]),
    "infer_result_tokens": (POINTER(c_int32), [RESULT_P]),
    "infer_result_n_tokens": (c_size_t, [RESULT_P]),
    "infer_result_finish_reason": (c_int, [RESULT_P]),
    "infer_result_status": (c_int, [RESULT_P]),
    "infer_result_error": (c_char_p, [RESULT_P]),
    "infer_result_metrics": (c_int, [RESULT_P, POINTER(RequestMetrics)]),
    "infer_result_logprobs": (POINTER(TokenLogprobStruct), [RESULT_P, POINTER(c_size_t)]),
    "infer_result_top_logprobs": (POINTER(TokenLogprobStruct), [RESULT_P, c_size_t, POINTER(c_size_t)]),
    "infer_result_prompt_logprobs": (POINTER(TokenLogprobStruct), [RESULT_P, POINTER(c_size_t)]),
    "infer_result_prompt_top_logprobs": (POINTER(TokenLogprobStruct), [RESULT_P, c_size_t, POINTER(c_size_t)]),
    "infer_result_prompt_logits": (POINTER(c_float), [RESULT_P, POINTER(c_size_t), POINTER(c_size_t)]),
    "infer_result_destroy": (None, [RESULT_P]),
    "infer_engine_get_stats": (c_int, [ENGINE_P, POINTER(EngineStats)]),
    "infer_engine_model_info": (c_int, [ENGINE_P, POINTER(ModelInfo)]),
    "infer_engine_tokenize": (
        c_int,
        [ENGINE_P, c_char_p, c_size_t, c_int, c_int, POINTER(c_int32), c_size_t, POINTER(c_size_t)],
    ),
    "infer_engine_detokenize": (
        c_int,
        [ENGINE_P, POINTER(c_int32), c_size_t, c_int, ctypes.c_char_p, c_size_t, POINTER(c_size_t)],
    ),
    "infer_engine_apply_chat_template": (
        c_int,
        [ENGINE_P, POINTER(ChatMessage), c_size_t, c_int, ctypes.c_char_p, c_size_t, POINTER(c_size_t)],
    ),
    "infer_engine_apply_chat_template_json": (
        c_int,
        [ENGINE_P, c_char_p, ctypes.c_char_p, c_size_t, POINTER(c_size_t)],
    ),
    "infer_chat_template_name": (c_char_p, [c_size_t]),
}

# infer_status values (stable, infer.h).
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_NOT_FOUND = 2
ERR_OUT_OF_RANGE = 7
ERR_CANCELLED = 9


class LibraryNotFound(OSError):
    """libinfer's shared library could not be loaded; the message lists every place tried."""


def _candidates():
    """(description, path-or-name) pairs in the order tried after LIBINFER_LIBRARY."""
    found = ctypes.util.find_library("infer")
    if found:
        yield f"ctypes.util.find_library('infer') -> {found}", found
    else:
        yield "ctypes.util.find_library('infer') (nothing)", None
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [os.path.join(sys.prefix, "lib")]
    for root in ("/usr/local/lib", "/usr/lib"):
        dirs.append(root)
        if multiarch:
            dirs.append(os.path.join(root, multiarch))
        dirs.append(root + "64")
    for d in dict.fromkeys(dirs):
        names = [f"libinfer.so.{ABI_VERSION}", "libinfer.so"]
        names += sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "libinfer.so.*")))
        for name in dict.fromkeys(names):
            path = os.path.join(d, name)
            yield path, path


def _declare(lib, where):
    for name, (restype, argtypes) in _FUNCTIONS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryNotFound(
                f"{where} is not a usable libinfer: it lacks the symbol {name} (too old for this binding?)"
            ) from None
        fn.restype = restype
        fn.argtypes = argtypes
    major = lib.infer_version_number() // 1000000
    # The SONAME's ABI number is what binds us; the major version moves with it.
    if major != ABI_VERSION:
        raise LibraryNotFound(
            f"{where} is libinfer {lib.infer_version().decode()}, this binding speaks ABI {ABI_VERSION}"
        )
    return lib


_lock = threading.Lock()
_lib = None


def load(path=None):
    """The loaded library (cached). path, else $LIBINFER_LIBRARY, else the installed one."""
    global _lib
    with _lock:
        if _lib is not None and path is None:
            return _lib
        explicit = path or os.environ.get("LIBINFER_LIBRARY")
        if explicit:
            what = explicit if path else f"LIBINFER_LIBRARY={explicit}"
            try:
                lib = ctypes.CDLL(explicit)
            except OSError as e:
                raise LibraryNotFound(f"cannot load {what}: {e}") from None
            _lib = _declare(lib, what)
            return _lib
        tried, absent = [], []
        for where, target in _candidates():
            if target is None:
                tried.append(where)
                continue
            if os.path.isabs(target) and not os.path.exists(target):
                absent.append(where)
                continue
            try:
                lib = ctypes.CDLL(target)
            except OSError as e:
                tried.append(f"{where} ({e})")
                continue
            _lib = _declare(lib, where)
            return _lib
        raise LibraryNotFound(
            "libinfer's shared library was not found; set LIBINFER_LIBRARY to the path of libinfer.so "
            "or install libinfer (cmake --install). Tried: LIBINFER_LIBRARY (unset); "
            + "; ".join(tried)
            + ("; absent: " + ", ".join(absent) if absent else "")
        )
