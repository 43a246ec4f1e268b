/*
 * libinfer — the C API. This header is the manual.
 *
 * Conventions (all functions):
 *   - Names are infer_<object>_<verb>. Nothing here throws or aborts: C++ exceptions never cross
 *     this boundary; a failing call returns an infer_status and, where a handle exists, leaves a
 *     readable message on it.
 *   - Strings returned as `const char *` are borrowed: owned by the library, valid as documented
 *     at each function, never to be freed by the caller.
 *   - New behaviour arrives as new symbols (a `_v2` suffix), never as a changed meaning of an
 *     existing one. Options structs start with `struct_size` so they can grow.
 *
 * Threading: every function in this header is thread-safe unless its comment says otherwise.
 *
 * Generation in five calls (examples/simple-c/main.c is a complete program):
 *
 *   infer_engine_params ep;
 *   infer_engine_params_init(&ep);
 *   ep.model_path = "model.gguf";
 *   infer_engine *engine;
 *   if (infer_engine_create(&ep, &engine) != INFER_OK) { puts(infer_last_error()); return 1; }
 *   infer_request_params rp;
 *   infer_request_params_init(&rp);
 *   rp.prompt = "Once upon a time";
 *   infer_request_id id;
 *   infer_engine_submit(engine, &rp, &id);            // returns at once
 *   infer_result *res;
 *   infer_engine_wait(engine, id, &res);               // blocks until the request ends
 *   puts(infer_result_text(res, NULL));
 *   infer_result_destroy(res);
 *   infer_engine_destroy(engine);
 *
 * Growing structs (the ABI rules, docs/c-api.md): every options struct starts with
 * `size_t struct_size`, set by its *_init function to the size the caller was compiled with. A
 * library that is newer than the caller reads only the fields inside struct_size, and the rest
 * take their defaults; a library older than the caller accepts the larger struct when the fields
 * it does not know are all zero, and refuses it (INFER_ERR_INVALID_ARGUMENT) otherwise. Structs
 * the library fills (infer_engine_stats, infer_model_info, infer_request_metrics) are handled
 * the same way: set struct_size = sizeof before the call; the library writes only what fits.
 */
#ifndef INFER_H
#define INFER_H

#include <stddef.h>
#include <stdint.h>

#include "infer/export.h"
#include "infer/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ---------------------------------------------------------------------------- */

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. Compare with
 * INFER_VERSION_STRING to detect a header/library mismatch. */
INFER_API const char *infer_version(void);
/* The library's version as INFER_VERSION_NUMBER computes it (major*1e6 + minor*1e3 + patch). */
INFER_API int infer_version_number(void);

/* ---- Status codes ------------------------------------------------------------------------ */

/* Values are stable; new codes may be added at the end. */
typedef enum infer_status {
  INFER_OK = 0,
  INFER_ERR_INVALID_ARGUMENT = 1, /* a caller passed a bad value (NULL where not allowed, ...) */
  INFER_ERR_NOT_FOUND = 2,        /* a file, key, tensor or request does not exist */
  INFER_ERR_IO = 3,               /* the operating system refused a read, write or map */
  INFER_ERR_MALFORMED_FILE = 4,   /* a file's content breaks its format */
  INFER_ERR_UNSUPPORTED = 5,      /* valid input this build cannot handle */
  INFER_ERR_OUT_OF_MEMORY = 6,    /* an allocation failed */
  INFER_ERR_OUT_OF_RANGE = 7,     /* a size or count exceeds a limit */
  INFER_ERR_OVERLOADED = 8,       /* admission control refused new work */
  INFER_ERR_CANCELLED = 9,        /* the request was cancelled */
  INFER_ERR_DEADLINE = 10,        /* the request ran past its deadline */
  INFER_ERR_INTERNAL = 11         /* a bug in libinfer */
} infer_status;

/* A short stable name for a status ("INFER_ERR_MALFORMED_FILE"); a static string, never NULL
 * (unknown values give "INFER_ERR_UNKNOWN"). */
INFER_API const char *infer_status_name(infer_status status);

/* ---- Logging ----------------------------------------------------------------------------- */

typedef enum infer_log_level {
  INFER_LOG_DEBUG = 0,
  INFER_LOG_INFO = 1,
  INFER_LOG_WARN = 2,
  INFER_LOG_ERROR = 3
} infer_log_level;

/* Receives each log message (no trailing newline; borrowed for the duration of the call). May be
 * called from any library thread, several at once: it must be thread-safe and return quickly. */
typedef void (*infer_log_callback)(infer_log_level level, const char *message, void *user_data);

/* Routes the library's log messages to `callback` (user_data is passed back untouched). NULL
 * restores the default, which writes to stderr. */
INFER_API void infer_log_set_callback(infer_log_callback callback, void *user_data);
/* Drops messages below `level` (default INFER_LOG_WARN). Returns INFER_ERR_INVALID_ARGUMENT for a
 * value outside the enum, INFER_OK otherwise. */
INFER_API infer_status infer_log_set_level(infer_log_level level);


/* ---- Errors ------------------------------------------------------------------------------ */

/* The message of the calling thread's last failed call that had no engine (infer_engine_create,
 * or any call passed a NULL engine); "" when there is none. Borrowed: valid until the calling
 * thread's next failing call. Never NULL. */
INFER_API const char *infer_last_error(void);

typedef struct infer_engine infer_engine; /* an opaque engine: a model, its KV cache, a worker */

/* The message of the calling thread's last failed call on `engine` ("" when none). Borrowed:
 * valid until the calling thread's next failing call on that engine, or the engine's destruction.
 * NULL engine: the same as infer_last_error(). Never NULL. */
INFER_API const char *infer_engine_error(const infer_engine *engine);

/* ---- Engine ------------------------------------------------------------------------------ */

/* Weight types an engine can quantize a float model's matrices to at load. */
typedef enum infer_weight_type {
  INFER_WEIGHT_KEEP = 0, /* as the file stores them */
  INFER_WEIGHT_Q8_0 = 1, /* as llama-quantize --pure writes Q8_0 */
  INFER_WEIGHT_Q4_0 = 2, /* as llama-quantize --pure writes Q4_0 */
  INFER_WEIGHT_INT8 = 3, /* INT8 W8A8: int8 weights with an f32 scale per output channel, activations
                            quantized to int8 per token, integer dots (docs/quantization.md) */
  INFER_WEIGHT_FP8 = 4,  /* FP8 E4M3 weights, an f32 scale per output channel; F32 activations */
  INFER_WEIGHT_FP8_TENSOR = 5, /* FP8 E4M3 weights, one f32 scale per matrix; F32 activations */
  INFER_WEIGHT_INT4 = 6, /* INT4 W4A16: symmetric 4-bit weights, an f32 scale per group of 128; F32 activations */
  INFER_WEIGHT_FP8_DYNAMIC = 7, /* W8A8-FP8: FP8 E4M3 weights per output channel, activations FP8 per token */
  INFER_WEIGHT_W8A16 = 8 /* INT8 W8A16: INT8's weights (an f32 scale per output channel); F32 activations */
} infer_weight_type;

/* Element types of the KV cache: F16 (llama.cpp's default), F32 (twice the bytes, for accuracy
 * checks), BF16 (as many bytes as F16), Q8_0 (about half: 32-element blocks with an F16 scale, as
 * llama.cpp's q8_0 cache; the model's head size must be a multiple of 32, else
 * infer_engine_create fails with INFER_INVALID_ARGUMENT; heads of a multiple of 64 are stored
 * rotated by a Walsh-Hadamard transform, as llama.cpp does, which loses far less; the environment
 * variable INFER_KV_ROTATE=0 turns that off), FP8 (half: one E4M3 number per element,
 * unscaled, saturating at +-448, as vLLM's fp8 cache without calibrated scales). */
typedef enum infer_kv_type { INFER_KV_F16 = 0, INFER_KV_F32 = 1, INFER_KV_BF16 = 2, INFER_KV_Q8_0 = 3, INFER_KV_FP8 = 4 } infer_kv_type;

/* Receives the fraction of the model loaded (0 to 1, rising; 1 last), on the thread that runs
 * infer_engine_create. */
typedef void (*infer_progress_callback)(float fraction, void *user_data);

/* How to build an engine. Fill with infer_engine_params_init, then set what you need. Every
 * field after model_path is a knob of docs/tuning.md; the defaults are in brackets. */
typedef struct infer_engine_params {
  size_t struct_size;         /* sizeof(infer_engine_params), set by init */
  const char *model_path;     /* a GGUF file or a Hugging Face model directory (config.json,
                                 safetensors, tokenizer files: docs/huggingface.md); borrowed for
                                 the call; required */
  int32_t n_threads;          /* compute threads [0 = all cores] */
  int64_t max_batch_tokens;   /* rows of one step: decodes + prompt chunks [512] */
  int32_t max_sequences;      /* sequences running at once [16] */
  int32_t max_waiting;        /* queued requests at most; submit fails INFER_ERR_OVERLOADED beyond [1024] */
  double batch_wait_ms;       /* an idle engine waits this long to gather a batch [0] */
  uint64_t kv_cache_bytes;    /* the KV block pool, allocated once [256 MiB] */
  int64_t kv_cache_tokens;    /* > 0: size the pool for this many positions instead [0] */
  int32_t block_size;         /* positions per KV block [16] */
  int32_t kv_type;            /* an infer_kv_type [INFER_KV_F16] */
  int32_t weight_type;        /* an infer_weight_type [INFER_WEIGHT_KEEP] */
  int64_t max_context;        /* longest sequence, prompt + output [0 = the model's, at most 4096] */
  int32_t prefix_cache;       /* nonzero: reuse the KV of identical prompt prefixes [1] */
  double price_per_hour;      /* machine cost, for infer_engine_stats' cost per million tokens [0] */
  int32_t metrics_window;     /* finished requests the latency percentiles look at [1000] */
  const char *chat_template;  /* chat format name for messages (infer_chat_template_name); NULL = the model's [NULL] */
  infer_progress_callback on_load_progress; /* [NULL] */
  void *progress_user_data;   /* passed to on_load_progress [NULL] */
  int32_t priority_preemption; /* nonzero: a waiting request that finds no KV blocks or sequence
                                * slot preempts running ones of lower priority [0] */
  const char *chat_template_text;      /* a Jinja chat template used instead of the model's, not
                                        * together with chat_template; NULL = none [NULL]. Copied. */
  const char *chat_template_variables; /* a JSON object: extra variables of every Jinja rendering
                                        * ({"enable_thinking": false}); NULL = none [NULL]. Copied. */
  const char *device;         /* where the engine computes: "cpu", "cuda" (GPU 0) or "cuda:N"; NULL =
                               * "cpu" [NULL]. Copied. A malformed name fails infer_engine_create
                               * with INFER_ERR_INVALID_ARGUMENT; a CUDA device in a library built
                               * without CUDA, or one the machine lacks, with INFER_ERR_UNSUPPORTED
                               * (see infer_cuda_device_count). */
} infer_engine_params;

/* Sets params->struct_size = struct_size and every field that lies within struct_size bytes to its
 * default; a field past this library's struct (a newer caller's) is set to zero. Writes nothing
 * beyond struct_size, so a caller compiled against an older, smaller struct is safe with a newer
 * library. struct_size below sizeof(size_t) or NULL params: no-op. Call it through
 * infer_engine_params_init, which passes the size this header defines (bindings that load the
 * library dynamically call it with their own struct's size). */
INFER_API void infer_engine_params_init_sized(infer_engine_params *params, size_t struct_size);
/* Sets struct_size = sizeof(infer_engine_params) as this header defines it, and every default.
 * NULL: no-op. */
static inline void infer_engine_params_init(infer_engine_params *params) {
  infer_engine_params_init_sized(params, sizeof *params);
}

/* CUDA devices this process can use: 0 when the library was built without CUDA, or when the
 * machine has no GPU or no driver. Thread-safe. */
INFER_API int infer_cuda_device_count(void);

/* The instruction set the CPU kernels of this process run: "scalar", "avx2", "avxvnni" (AVX2 with
 * AVX-VNNI) or "avx512" -- the best the CPU has, lowered by the environment variable
 * INFER_CPU_ISA. A static string; thread-safe. */
INFER_API const char *infer_cpu_isa(void);

/* Loads the model, plans the KV pool and starts the engine's worker. On success *out is a new
 * engine (caller frees with infer_engine_destroy); on failure *out is NULL and
 * infer_last_error() says why.
 * Returns INFER_OK; INFER_ERR_INVALID_ARGUMENT (NULL params/out/model_path, a bad knob, a
 * struct_size this library cannot read); INFER_ERR_NOT_FOUND / INFER_ERR_IO (the file);
 * INFER_ERR_MALFORMED_FILE; INFER_ERR_UNSUPPORTED (an architecture or tensor type this build
 * does not run, or a device it does not have); INFER_ERR_OUT_OF_MEMORY. */
INFER_API infer_status infer_engine_create(const infer_engine_params *params, infer_engine **out);

/* Cancels what is in flight (their callbacks see the final event), stops the worker and frees
 * the engine. Results already returned stay valid. NULL: no-op. Not to be called while another
 * thread still uses the engine, nor from a token callback. */
INFER_API void infer_engine_destroy(infer_engine *engine);

/* Stops accepting requests; finishes (finish_in_flight != 0) or cancels what is queued and
 * running, and returns when the worker is idle. Later submits fail with INFER_ERR_CANCELLED.
 * Returns INFER_OK, or INFER_ERR_INVALID_ARGUMENT for a NULL engine. */
INFER_API infer_status infer_engine_shutdown(infer_engine *engine, int finish_in_flight);

/* ---- Requests ---------------------------------------------------------------------------- */

typedef uint64_t infer_request_id;

/* Why a request ended (values are stable). */
typedef enum infer_finish_reason {
  INFER_FINISH_NONE = 0,      /* still running */
  INFER_FINISH_STOP = 1,      /* an end-of-generation token, end of turn or stop string */
  INFER_FINISH_LENGTH = 2,    /* max_tokens */
  INFER_FINISH_CONTEXT = 3,   /* the sequence reached max_context */
  INFER_FINISH_CANCELLED = 4, /* infer_engine_cancel, a callback's nonzero return, or shutdown */
  INFER_FINISH_DEADLINE = 5,  /* timeout_ms passed */
  INFER_FINISH_ERROR = 6      /* see infer_result_status */
} infer_finish_reason;

/* A short stable name: "none", "stop", "length", "context", "cancelled", "deadline", "error";
 * "unknown" for other values. Static, never NULL. */
INFER_API const char *infer_finish_reason_name(infer_finish_reason reason);

/* What a token callback receives. The library owns it: more fields may follow in later versions
 * (never read past those you know; never copy it by value into a struct of your own size). */
typedef struct infer_token_event {
  infer_request_id id;
  int32_t token;              /* the generated token; -1 on the final event */
  const char *text;           /* the text this token completes (NUL-terminated; may be "" while a
                                 UTF-8 character is unfinished); borrowed for the call */
  size_t text_len;
  int finished;               /* nonzero on the last event of the request */
  infer_finish_reason reason; /* with finished */
  double logprob;             /* the token's log-probability when the request asked for logprobs, else 0 */
} infer_token_event;

/* Called on the engine's worker for every generated token and once more with finished != 0.
 * Returning nonzero cancels the request: no further token is generated (the final event follows
 * within one step, with INFER_FINISH_CANCELLED). Must return quickly; may call
 * infer_engine_submit and infer_engine_cancel, not infer_engine_wait, infer_engine_read,
 * infer_engine_shutdown or infer_engine_destroy. */
typedef int (*infer_token_callback)(const infer_token_event *event, void *user_data);

/* A message of a conversation (both strings borrowed for the call that takes them). */
typedef struct infer_chat_message {
  const char *role;           /* "system", "user" or "assistant" */
  const char *content;
} infer_chat_message;

/* One request. Fill with infer_request_params_init, then set a prompt: text, token ids, or chat
 * messages (exactly one). Every pointer is borrowed for the infer_engine_submit call only: the
 * engine copies what it needs. Defaults in brackets (llama.cpp's sampling defaults). */
typedef struct infer_request_params {
  size_t struct_size;             /* sizeof(infer_request_params), set by init */
  const char *prompt;             /* NUL-terminated text [NULL] */
  const int32_t *prompt_tokens;   /* or token ids ... [NULL] */
  size_t n_prompt_tokens;         /* ... this many [0] */
  const infer_chat_message *messages; /* or a conversation, rendered with the chat template and an
                                     assistant header; the answer also ends at its end of turn [NULL] */
  size_t n_messages;              /* [0] */
  int32_t add_special;            /* text prompts: add BOS as the model asks [1] */
  int32_t parse_special;          /* text prompts: special-token text becomes special tokens [1] */
  int64_t max_tokens;             /* generated tokens at most; -1 = until the end or the context [256] */
  float temperature;              /* 0 = greedy [0.8] */
  int32_t top_k;                  /* 0 = off [40] */
  float top_p;                    /* 1 = off [0.95] */
  float min_p;                    /* 0 = off [0.05] */
  float repeat_penalty;           /* 1 = off [1] */
  int32_t repeat_last_n;          /* tokens the penalties look back on [64] */
  float frequency_penalty;        /* 0 = off [0] */
  float presence_penalty;         /* 0 = off [0] */
  const char *const *stop;        /* stop strings (not part of the output) [NULL] */
  size_t n_stop;                  /* [0] */
  uint64_t seed;                  /* sampling seed [0] */
  int32_t ignore_eos;             /* nonzero: go on past end-of-generation tokens [0] */
  int32_t logprobs;               /* nonzero: each generated token's log-probability [0] */
  int32_t top_logprobs;           /* and its most likely alternatives, 0 to 20 [0] */
  int64_t prompt_logprobs_from;   /* >= 0: score prompt tokens [from, n) (values < 1 mean 1); -1 = off [-1] */
  int32_t prompt_top_logprobs;    /* alternatives per scored prompt token, 0 to 20 [0] */
  int32_t prompt_logits;          /* nonzero: also the raw logits that predict each scored token [0] */
  int32_t priority;               /* higher runs first and is preempted last [0] */
  double timeout_ms;              /* deadline from submit; 0 = none [0] */
  infer_token_callback on_token;  /* [NULL] */
  void *user_data;                /* passed to on_token [NULL] */
  int32_t detached;               /* nonzero: output goes to on_token only and the engine forgets the
                                     request when it ends (no wait, no read) [0] */
} infer_request_params;

/* As infer_engine_params_init_sized, for request parameters. */
INFER_API void infer_request_params_init_sized(infer_request_params *params, size_t struct_size);
/* Sets struct_size = sizeof(infer_request_params) as this header defines it, and every default.
 * NULL: no-op. */
static inline void infer_request_params_init(infer_request_params *params) {
  infer_request_params_init_sized(params, sizeof *params);
}

/* Queues a request and returns at once with its id in *out (0 on failure). Every request that is
 * not detached must be collected with infer_engine_wait, which frees its record.
 * Returns INFER_OK; INFER_ERR_INVALID_ARGUMENT (NULL arguments, no prompt or more than one kind,
 * a parameter out of range, a token outside the vocabulary, bad chat roles);
 * INFER_ERR_NOT_FOUND (messages for a model without a chat template);
 * INFER_ERR_OUT_OF_RANGE (the prompt is longer than max_context or the KV pool);
 * INFER_ERR_OVERLOADED (max_waiting requests are queued); INFER_ERR_CANCELLED (after shutdown). */
INFER_API infer_status infer_engine_submit(infer_engine *engine, const infer_request_params *params, infer_request_id *out);

/* Ends the request within one step (also in the middle of its prompt). INFER_OK also for one that
 * already ended but was not yet collected; INFER_ERR_NOT_FOUND for an unknown or collected id;
 * INFER_ERR_INVALID_ARGUMENT for a NULL engine. */
INFER_API infer_status infer_engine_cancel(infer_engine *engine, infer_request_id id);

/* The output a request produced since its previous read. */
typedef struct infer_delta infer_delta;

/* Waits up to timeout_ms (< 0: forever; 0: no wait) for new output of a request and returns it in
 * *out (caller frees with infer_delta_destroy): possibly empty when the time ran out. A request
 * that ended stays readable (with finished set) until infer_engine_wait collects it.
 * Returns INFER_OK; INFER_ERR_NOT_FOUND (unknown or collected id); INFER_ERR_INVALID_ARGUMENT
 * (NULL arguments, a detached request). */
INFER_API infer_status infer_engine_read(infer_engine *engine, infer_request_id id, double timeout_ms, infer_delta **out);

/* The new text (NUL-terminated; *len its length when len is not NULL), borrowed from the delta. */
INFER_API const char *infer_delta_text(const infer_delta *delta, size_t *len);
/* The new token ids (*n of them; n must not be NULL), borrowed from the delta; NULL when none. */
INFER_API const int32_t *infer_delta_tokens(const infer_delta *delta, size_t *n);
/* Nonzero once the request has ended; then infer_delta_finish_reason says why. */
INFER_API int infer_delta_finished(const infer_delta *delta);
INFER_API infer_finish_reason infer_delta_finish_reason(const infer_delta *delta);
/* NULL: no-op. */
INFER_API void infer_delta_destroy(infer_delta *delta);

/* Everything a request produced. */
typedef struct infer_result infer_result;

/* Blocks until the request ends and returns all it produced in *out (caller frees with
 * infer_result_destroy); the id is then forgotten. A request that ended with an error is still
 * INFER_OK here: see infer_result_status. Returns INFER_OK; INFER_ERR_NOT_FOUND (unknown or
 * collected id); INFER_ERR_INVALID_ARGUMENT (NULL arguments, a detached request). */
INFER_API infer_status infer_engine_wait(infer_engine *engine, infer_request_id id, infer_result **out);

/* infer_engine_submit + infer_engine_wait. */
INFER_API infer_status infer_engine_generate(infer_engine *engine, const infer_request_params *params, infer_result **out);

/* The generated text (NUL-terminated; *len its length when len is not NULL); borrowed from the
 * result. NULL result: NULL. */
INFER_API const char *infer_result_text(const infer_result *result, size_t *len);
/* The generated token ids (infer_result_n_tokens of them), borrowed; NULL when none. */
INFER_API const int32_t *infer_result_tokens(const infer_result *result);
INFER_API size_t infer_result_n_tokens(const infer_result *result);
INFER_API infer_finish_reason infer_result_finish_reason(const infer_result *result);
/* INFER_OK, INFER_ERR_CANCELLED, INFER_ERR_DEADLINE, or the error that ended the request
 * (INFER_ERR_OUT_OF_MEMORY, INFER_ERR_INTERNAL, ...); infer_result_error has its message. */
INFER_API infer_status infer_result_status(const infer_result *result);
INFER_API const char *infer_result_error(const infer_result *result); /* "" when ok; borrowed */

/* A request's timings (ms) and token counts. */
typedef struct infer_request_metrics {
  size_t struct_size;       /* set to sizeof(infer_request_metrics) before the call */
  double queue_ms;          /* submit -> first scheduled */
  double ttft_ms;           /* submit -> first generated token */
  double tpot_ms;           /* mean time per output token after the first */
  double e2e_ms;            /* submit -> finished */
  int64_t prompt_tokens;
  int64_t cached_tokens;    /* prompt tokens served from the prefix cache */
  int64_t generated_tokens;
  int64_t preemptions;
} infer_request_metrics;

/* Fills *out (up to out->struct_size). Returns INFER_OK, or INFER_ERR_INVALID_ARGUMENT for NULL
 * arguments or a struct_size smaller than a size_t. */
INFER_API infer_status infer_result_metrics(const infer_result *result, infer_request_metrics *out);

typedef struct infer_token_logprob {
  int32_t token;
  double logprob;             /* double: summed over a text (perplexity) it keeps its precision */
} infer_token_logprob;

/* With logprobs: one entry per generated token (the token and its log-probability), *n of them;
 * NULL and *n = 0 otherwise. Borrowed from the result. */
INFER_API const infer_token_logprob *infer_result_logprobs(const infer_result *result, size_t *n);
/* The most likely alternatives of generated token i (top_logprobs of them, most likely first). */
INFER_API const infer_token_logprob *infer_result_top_logprobs(const infer_result *result, size_t i, size_t *n);
/* With prompt_logprobs_from: prompt tokens [from, n_prompt) and their log-probabilities given the
 * tokens before them, *n entries; borrowed. */
INFER_API const infer_token_logprob *infer_result_prompt_logprobs(const infer_result *result, size_t *n);
INFER_API const infer_token_logprob *infer_result_prompt_top_logprobs(const infer_result *result, size_t i, size_t *n);
/* With prompt_logits: *n_rows rows of *n_vocab floats, row i the logits that predict scored
 * prompt token i; borrowed. */
INFER_API const float *infer_result_prompt_logits(const infer_result *result, size_t *n_rows, size_t *n_vocab);

/* NULL: no-op. */
INFER_API void infer_result_destroy(infer_result *result);

/* ---- Statistics and the model ------------------------------------------------------------- */

typedef struct infer_latency {
  double p50, p95, p99, mean; /* ms, nearest rank */
  int64_t count;
} infer_latency;

/* Engine-wide figures (docs/engine.md explains each). */
typedef struct infer_engine_stats {
  size_t struct_size;       /* set to sizeof(infer_engine_stats) before the call */
  double uptime_s;
  int64_t running, waiting;
  int64_t requests_finished, requests_cancelled, requests_failed, requests_rejected;
  int64_t prompt_tokens, computed_prompt_tokens, cached_prompt_tokens, generated_tokens;
  double prompt_tokens_per_s, generated_tokens_per_s; /* over the uptime */
  double prefix_hit_rate;   /* cached / looked-up prompt tokens */
  int64_t preemptions, steps;
  int64_t kv_blocks_total, kv_blocks_used, kv_blocks_cached, kv_blocks_free;
  double tokenize_ms, schedule_ms, forward_ms, sample_ms, detokenize_ms; /* summed */
  infer_latency ttft_ms, tpot_ms, e2e_ms, queue_ms; /* over the last metrics_window requests */
  double cost_per_million_tokens;
  int32_t n_threads;        /* compute threads in use: params.n_threads (0 = all cores) clamped to the hardware's */
} infer_engine_stats;

/* Fills *out (up to out->struct_size). INFER_ERR_INVALID_ARGUMENT for NULL arguments or a
 * struct_size smaller than a size_t. */
INFER_API infer_status infer_engine_get_stats(infer_engine *engine, infer_engine_stats *out);

typedef struct infer_model_info {
  size_t struct_size;          /* set to sizeof(infer_model_info) before the call */
  const char *architecture;    /* "llama", "gemma3", ...; borrowed for the engine's lifetime */
  const char *name;            /* general.name ("" when absent); borrowed likewise */
  const char *chat_template;   /* the chat format used for messages; "" when none; borrowed likewise */
  int64_t n_vocab;
  int64_t n_ctx;               /* the longest sequence the engine accepts */
  int64_t n_ctx_train;
  int64_t n_embd, n_layer, n_head, n_head_kv;
  int64_t n_params;
  uint64_t size_bytes;         /* bytes of tensor data */
  int32_t bos, eos, eot;       /* special token ids; -1 when none */
  const char *file_type;       /* the file's weight type as llama.cpp names it ("Q4_0", "Q4_K - Medium",
                                  "F16"; "(guessed) ..." without general.file_type); borrowed likewise */
  /* The model's own sampling defaults (a Hugging Face directory's generation_config.json, or a
   * GGUF's general.sampling.*); -1 when the model sets none. infer_request_params_init's defaults
   * do not change: a host that wants them copies them into its request params. */
  float default_temperature;
  int32_t default_top_k;
  float default_top_p;
} infer_model_info;

/* Fills *out (up to out->struct_size); INFER_ERR_INVALID_ARGUMENT as for infer_engine_get_stats. */
INFER_API infer_status infer_engine_model_info(infer_engine *engine, infer_model_info *out);

/* ---- Text ---------------------------------------------------------------------------------- */

/* Tokenizes text[0, len) as a prompt would be (add_special: BOS as the model asks; parse_special:
 * special-token text becomes special tokens) into tokens[0, capacity). *n_tokens receives the
 * number of ids, also when they do not fit: then INFER_ERR_OUT_OF_RANGE and nothing is written
 * (call again with a buffer that large). tokens may be NULL when capacity is 0.
 * Returns INFER_OK, INFER_ERR_OUT_OF_RANGE, INFER_ERR_INVALID_ARGUMENT (NULL engine, text or
 * n_tokens). */
INFER_API infer_status infer_engine_tokenize(infer_engine *engine, const char *text, size_t len, int add_special,
                                             int parse_special, int32_t *tokens, size_t capacity, size_t *n_tokens);

/* The text of tokens[0, n) into buf[0, capacity) with a terminating NUL (special tokens as their
 * text when render_special). *len receives the text's length (without the NUL), also when it does
 * not fit: then INFER_ERR_OUT_OF_RANGE and nothing is written. buf may be NULL when capacity is 0.
 * INFER_ERR_INVALID_ARGUMENT for NULL arguments or an id outside the vocabulary. */
INFER_API infer_status infer_engine_detokenize(infer_engine *engine, const int32_t *tokens, size_t n, int render_special,
                                               char *buf, size_t capacity, size_t *len);

/* The conversation messages[0, n) as the engine's chat template renders it (what submit tokenizes
 * for messages), an assistant header appended when add_generation_prompt; into buf as
 * infer_engine_detokenize does. INFER_ERR_INVALID_ARGUMENT (NULL arguments, bad roles or order),
 * INFER_ERR_NOT_FOUND (the model has no template and params named none), INFER_ERR_OUT_OF_RANGE. */
INFER_API infer_status infer_engine_apply_chat_template(infer_engine *engine, const infer_chat_message *messages, size_t n,
                                                        int add_generation_prompt, char *buf, size_t capacity, size_t *len);

/* A conversation given as JSON, {"messages": [{"role": ..., "content": ..., ...}, ...],
 * "add_generation_prompt": true, "tools": [...], any other keyword}, as the engine's chat template
 * renders it: a Jinja template sees every key as a variable (tool calls, enable_thinking, ...);
 * into buf as infer_engine_detokenize does. INFER_ERR_INVALID_ARGUMENT (NULL arguments, JSON that
 * is not such an object, a template error or raise_exception: the message names it),
 * INFER_ERR_NOT_FOUND (no template), INFER_ERR_UNSUPPORTED (a construct the interpreter lacks),
 * INFER_ERR_OUT_OF_RANGE (buf too small, or a template past its limits). Thread-safe. */
INFER_API infer_status infer_engine_apply_chat_template_json(infer_engine *engine, const char *conversation_json, char *buf,
                                                             size_t capacity, size_t *len);

/* The chat formats by name, for infer_engine_params.chat_template: the i-th name (static), or NULL
 * past the last. */
INFER_API const char *infer_chat_template_name(size_t i);

#ifdef __cplusplus
}
#endif

#endif /* INFER_H */
