"""What the binding hands back: errors, completions, metrics, statistics, model facts."""

import ctypes
import dataclasses
from typing import List, Optional

from . import _lib
from ._lib import LibraryNotFound

FINISH_REASONS = ("none", "stop", "length", "context", "cancelled", "deadline", "error")

class InferError(Exception):
    """A failed C call: .status is the stable name ("INFER_ERR_NOT_FOUND"), .code its number,
    .message the library's message (infer_last_error / infer_engine_error)."""

    def __init__(self, code, message, what=""):
        self.code = int(code)
        self.status = _status_name(self.code)
        self.message = message
        prefix = f"{what}: " if what else ""
        super().__init__(f"{prefix}{self.status}: {message}" if message else f"{prefix}{self.status}")


def _status_name(code):
    try:
        return _lib.load().infer_status_name(code).decode()
    except LibraryNotFound:
        return f"status {code}"


def _text(ptr, length):
    return ctypes.string_at(ptr, length).decode("utf-8", errors="replace") if length else ""


@dataclasses.dataclass
class Metrics:
    """A request's timings (ms) and token counts (infer_request_metrics)."""

    queue_ms: float
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    preemptions: int


@dataclasses.dataclass
class TokenLogprob:
    """A token, its log-probability and (when top_logprobs was asked) the most likely
    alternatives as (token, logprob) pairs, most likely first."""

    token: int
    logprob: float
    top: List[tuple] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Completion:
    """Everything a request produced. finish_reason is one of FINISH_REASONS; status is "INFER_OK"
    or the error that ended the request (error has its message)."""

    id: int
    text: str
    ids: List[int]
    finish_reason: str
    status: str
    error: str
    metrics: Metrics
    logprobs: Optional[List[TokenLogprob]] = None
    prompt_logprobs: Optional[List[TokenLogprob]] = None
    prompt_logits: Optional[List[List[float]]] = None


@dataclasses.dataclass
class TokenEvent:
    """What an on_token callback receives (infer_token_event); token is -1 on the final event."""

    id: int
    token: int
    text: str
    finished: bool
    finish_reason: str
    logprob: float


@dataclasses.dataclass
class LatencyStats:
    p50: float
    p95: float
    p99: float
    mean: float
    count: int


def _struct_to_dataclass(name, struct):
    fields = []
    for fname, ftype in struct._fields_:
        if fname == "struct_size":
            continue
        fields.append((fname, LatencyStats if ftype is _lib.Latency else (float if ftype in (_lib.c_double,) else int)))
    return dataclasses.make_dataclass(name, fields)


EngineStats = _struct_to_dataclass("EngineStats", _lib.EngineStats)
EngineStats.__doc__ = "Engine-wide figures (infer_engine_stats; docs/engine.md explains each)."


@dataclasses.dataclass
class ModelInfo:
    """The model an engine serves (infer_model_info)."""

    architecture: str
    name: str
    chat_template: str
    n_vocab: int
    n_ctx: int
    n_ctx_train: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_params: int
    size_bytes: int
    bos: int
    eos: int
    eot: int
    file_type: str
    default_temperature: float = -1.0  # the model's own sampling defaults (generation_config.json,
    default_top_k: int = -1            # general.sampling.*); -1 when the model sets none
    default_top_p: float = -1.0


def _reason(code):
    return FINISH_REASONS[code] if 0 <= code < len(FINISH_REASONS) else "unknown"
