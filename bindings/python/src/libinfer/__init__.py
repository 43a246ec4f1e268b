"""libinfer: Python bindings (ctypes) over libinfer's C API, capi/include/infer.h.

    import libinfer
    with libinfer.Engine("model.gguf") as engine:
        for piece in engine.stream("Once upon a time", max_tokens=64, temperature=0):
            print(piece, end="", flush=True)

The shared library is loaded on first use (Engine(...), library_version(), ...), from
$LIBINFER_LIBRARY if set, else where ctypes.util.find_library("infer") or the usual lib
directories (/usr/local/lib, /usr/lib and their multiarch and lib64 twins) have it; failing that
the call raises LibraryNotFound (an OSError) naming every place tried. `import libinfer` itself
never needs the library.
"""

from ._engine import Engine, chat_template_names, cpu_isa, cuda_device_count, library_version, set_log_callback, set_log_level
from ._request import Request, Stream
from ._types import (
    FINISH_REASONS,
    Completion,
    EngineStats,
    InferError,
    LatencyStats,
    Metrics,
    ModelInfo,
    TokenEvent,
    TokenLogprob,
)
from ._lib import LibraryNotFound, load as load_library

__version__ = "0.1.0"

__all__ = [
    "FINISH_REASONS",
    "Completion",
    "Engine",
    "EngineStats",
    "InferError",
    "LatencyStats",
    "LibraryNotFound",
    "Metrics",
    "ModelInfo",
    "Request",
    "Stream",
    "TokenEvent",
    "TokenLogprob",
    "chat_template_names",
    "cpu_isa",
    "cuda_device_count",
    "library_version",
    "load_library",
    "set_log_callback",
    "set_log_level",
]
