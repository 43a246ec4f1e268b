/* The C API, from C: a program that uses only infer.h, as a host would.
 *
 *   infer-capi-tests MODEL CASE      runs one case (below); exit 0 when every check holds
 *   infer-capi-tests MODEL ids TEXT  prints the greedy ids of 16 tokens after TEXT on one line
 *                                    (compared with infer-generate --ids by capi_generate_ids.sh)
 *
 * MODEL is the random-weight Llama of infer-make-model (byte vocabulary: 259 tokens, <s> = 1,
 * </s> = 2, no chat template). Each case checks properties against independent references (a
 * single-threaded run, the tokenizer's ids, a log-softmax computed here) or invariants. */
#include <infer.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *g_model;
static int g_failures, g_checks; /* main thread only: worker threads report through their jobs */

#define CHECK(cond)                                                              \
  do {                                                                           \
    ++g_checks;                                                                  \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      ++g_failures;                                                              \
    }                                                                            \
  } while (0)

/* A call that must succeed; on failure prints its message. */
#define CHECK_OK(engine, call)                                                                   \
  do {                                                                                           \
    infer_status st_ = (call);                                                                   \
    ++g_checks;                                                                                  \
    if (st_ != INFER_OK) {                                                                       \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call, infer_status_name(st_), \
              infer_engine_error(engine));                                                       \
      ++g_failures;                                                                              \
    }                                                                                            \
  } while (0)

/* Leaves a message no other call produces in the slot `engine` reports to (the thread's last error
 * when NULL) and returns a copy, so that a check can tell a new message from a stale one. */
static void mark_error(infer_engine *engine, char *copy, size_t size) {
  static unsigned counter;
  char path[96];
  ++counter;
  if (engine) {
    (void)infer_engine_cancel(engine, 1000000000u + counter);
  } else {
    infer_engine_params p;
    infer_engine *e = NULL;
    infer_engine_params_init(&p);
    snprintf(path, sizeof path, "/nonexistent/marker-%u.gguf", counter);
    p.model_path = path;
    (void)infer_engine_create(&p, &e);
  }
  snprintf(copy, size, "%s", infer_engine_error(engine));
}

/* A call that must fail with `want` and leave a new, non-empty message where the header says:
 * on the engine, or (engine NULL) in infer_last_error(). */
#define CHECK_FAILS(engine, call, want) check_fails_((engine), #call, __LINE__, (want), (call_marker((engine)), (call)))
static char g_marker[512];
static int call_marker(infer_engine *engine) {
  mark_error(engine, g_marker, sizeof g_marker);
  return 0;
}
static void check_fails_(infer_engine *engine, const char *text, int line, infer_status want, infer_status got) {
  const char *msg = engine ? infer_engine_error(engine) : infer_last_error();
  if (got != want) {
    fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, line, text, infer_status_name(got),
            infer_status_name(want), msg);
    ++g_failures;
    return;
  }
  if (msg == NULL || msg[0] == '\0' || strcmp(msg, g_marker) == 0) {
    fprintf(stderr, "%s:%d: %s left no message of its own (\"%s\")\n", __FILE__, line, text, msg ? msg : "(null)");
    ++g_failures;
  }
  if (!engine && strcmp(infer_engine_error(NULL), infer_last_error()) != 0) {
    fprintf(stderr, "%s:%d: infer_engine_error(NULL) differs from infer_last_error()\n", __FILE__, line);
    ++g_failures;
  }
}

static infer_engine *create_engine(const char *chat_template) {
  infer_engine_params p;
  infer_engine *e = NULL;
  infer_engine_params_init(&p);
  p.model_path = g_model;
  p.n_threads = 2;
  p.kv_cache_tokens = 4096; /* small enough for the sanitizers' builds */
  p.chat_template = chat_template;
  if (infer_engine_create(&p, &e) != INFER_OK) {
    fprintf(stderr, "cannot create an engine on %s: %s\n", g_model, infer_last_error());
    exit(1);
  }
  return e;
}

/* Greedy, past end-of-generation tokens, so that a request makes exactly max_tokens tokens. */
static void greedy_params(infer_request_params *rp, const char *prompt, int64_t max_tokens) {
  infer_request_params_init(rp);
  rp->prompt = prompt;
  rp->temperature = 0;
  rp->max_tokens = max_tokens;
  rp->ignore_eos = 1;
}

/* The tokens of a finished request; *n of them (caller frees), NULL when generate fails with *status.
 * Touches no global, so worker threads call it too. */
static int32_t *run_ids(infer_engine *e, const infer_request_params *rp, size_t *n, infer_status *status) {
  infer_result *res = NULL;
  int32_t *ids;
  *n = 0;
  *status = infer_engine_generate(e, rp, &res);
  if (*status != INFER_OK || !res) return NULL;
  *n = infer_result_n_tokens(res);
  ids = malloc((*n + 1) * sizeof *ids);
  if (*n) memcpy(ids, infer_result_tokens(res), *n * sizeof *ids);
  infer_result_destroy(res);
  return ids;
}

/* run_ids on the main thread: a failed generate is a failed check. */
static int32_t *generate_ids(infer_engine *e, const infer_request_params *rp, size_t *n) {
  infer_status st;
  int32_t *ids = run_ids(e, rp, n, &st);
  CHECK(st == INFER_OK);
  if (st != INFER_OK) fprintf(stderr, "  generate returned %s: %s\n", infer_status_name(st), infer_engine_error(e));
  return ids;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
  return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void sleep_ms(int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* ---- every call with NULL or invalid arguments ------------------------------------------- */

static void *read_other_thread_error(void *engine) {
  /* This thread made no failing call on the engine: it must not see another thread's message. */
  return (void *)(intptr_t)(infer_engine_error((const infer_engine *)engine)[0] == '\0');
}

static void case_invalid_arguments(void) {
  infer_engine_params ep;
  infer_request_params rp;
  infer_engine *e = NULL;
  infer_result *res = (infer_result *)1;
  infer_delta *delta = (infer_delta *)1;
  infer_request_id id = 7;
  infer_engine_stats stats;
  infer_model_info info;
  infer_request_metrics metrics;
  int32_t ids[8];
  char buf[64];
  size_t n = 99;
  const char *stop_null[1] = {NULL};
  infer_chat_message bad_msg = {NULL, "hi"};
  infer_chat_message msg = {"user", "hi"};
  int32_t bad_token = 1000;
  pthread_t other;
  void *other_clean = NULL;

  CHECK(infer_last_error() != NULL && infer_engine_error(NULL) != NULL);

  /* Engine creation. */
  CHECK_FAILS(NULL, infer_engine_create(NULL, &e), INFER_ERR_INVALID_ARGUMENT);
  CHECK(e == NULL);
  infer_engine_params_init(&ep);
  ep.model_path = g_model;
  CHECK_FAILS(NULL, infer_engine_create(&ep, NULL), INFER_ERR_INVALID_ARGUMENT);
  ep.model_path = NULL;
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  ep.model_path = "/nonexistent/dir/model.gguf";
  mark_error(NULL, g_marker, sizeof g_marker);
  {
    infer_status st = infer_engine_create(&ep, &e);
    CHECK(st == INFER_ERR_NOT_FOUND || st == INFER_ERR_IO);
    CHECK(strstr(infer_last_error(), "/nonexistent/dir/model.gguf") != NULL);
  }
  ep.model_path = g_model;
  ep.kv_type = 7;
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  /* The test model's heads have 16 dimensions: no whole Q8_0 block per row. */
  ep.kv_type = INFER_KV_Q8_0;
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  CHECK(strstr(infer_last_error(), "multiple of 32") != NULL);
  ep.kv_type = INFER_KV_BF16;
  CHECK(infer_engine_create(&ep, &e) == INFER_OK);
  infer_engine_destroy(e);
  e = NULL;
  ep.kv_type = INFER_KV_F16;
  ep.weight_type = 9;
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  ep.weight_type = INFER_WEIGHT_KEEP;
  ep.n_threads = -1;
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  ep.n_threads = 2;
  ep.max_sequences = 0;
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  ep.max_sequences = 16;
  /* Devices: a malformed name is an invalid argument; a CUDA device past the last one (every one
   * in a build without CUDA or on a machine without a GPU) is unsupported. */
  ep.device = "gpu";
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  CHECK(strstr(infer_last_error(), "device") != NULL);
  ep.device = "cuda:1023";
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_UNSUPPORTED);
  CHECK(infer_cuda_device_count() >= 0);
  {
    const char *isa = infer_cpu_isa();
    CHECK(isa != NULL);
    CHECK(!strcmp(isa, "scalar") || !strcmp(isa, "avx2") || !strcmp(isa, "avxvnni") || !strcmp(isa, "avx512"));
  }
  if (infer_cuda_device_count() == 0) {
    ep.device = "cuda";
    CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_UNSUPPORTED);
  }
  ep.device = "cpu";
  CHECK(infer_engine_create(&ep, &e) == INFER_OK);
  infer_engine_destroy(e);
  e = NULL;
  ep.device = NULL;
  ep.chat_template = "no-such-format";
  CHECK(infer_engine_create(&ep, &e) != INFER_OK && infer_last_error()[0] != '\0');
  ep.chat_template = NULL;
  ep.struct_size = 4;
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  ep.struct_size = (size_t)1 << 40; /* an uninitialized struct: refused, not scanned */
  CHECK_FAILS(NULL, infer_engine_create(&ep, &e), INFER_ERR_INVALID_ARGUMENT);
  CHECK(e == NULL);

  /* Every call with a NULL engine: INFER_ERR_INVALID_ARGUMENT and infer_last_error(). */
  infer_request_params_init(&rp);
  rp.prompt = "Hello";
  CHECK_FAILS(NULL, infer_engine_submit(NULL, &rp, &id), INFER_ERR_INVALID_ARGUMENT);
  CHECK(id == 0);
  CHECK_FAILS(NULL, infer_engine_cancel(NULL, 1), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(NULL, infer_engine_read(NULL, 1, 0, &delta), INFER_ERR_INVALID_ARGUMENT);
  CHECK(delta == NULL);
  CHECK_FAILS(NULL, infer_engine_wait(NULL, 1, &res), INFER_ERR_INVALID_ARGUMENT);
  CHECK(res == NULL);
  CHECK_FAILS(NULL, infer_engine_generate(NULL, &rp, &res), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(NULL, infer_engine_shutdown(NULL, 1), INFER_ERR_INVALID_ARGUMENT);
  stats.struct_size = sizeof stats;
  CHECK_FAILS(NULL, infer_engine_get_stats(NULL, &stats), INFER_ERR_INVALID_ARGUMENT);
  info.struct_size = sizeof info;
  CHECK_FAILS(NULL, infer_engine_model_info(NULL, &info), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(NULL, infer_engine_tokenize(NULL, "a", 1, 1, 1, ids, 8, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(NULL, infer_engine_detokenize(NULL, ids, 0, 0, buf, sizeof buf, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(NULL, infer_engine_apply_chat_template(NULL, &msg, 1, 1, buf, sizeof buf, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(NULL, infer_engine_apply_chat_template_json(NULL, "{}", buf, sizeof buf, &n), INFER_ERR_INVALID_ARGUMENT);
  metrics.struct_size = sizeof metrics;
  CHECK_FAILS(NULL, infer_result_metrics(NULL, &metrics), INFER_ERR_INVALID_ARGUMENT);

  /* Accessors and destroys of NULL: harmless. */
  CHECK(infer_result_text(NULL, &n) == NULL && n == 0);
  CHECK(infer_result_tokens(NULL) == NULL && infer_result_n_tokens(NULL) == 0);
  CHECK(infer_result_error(NULL) != NULL);
  CHECK(infer_result_logprobs(NULL, &n) == NULL && n == 0);
  CHECK(infer_result_top_logprobs(NULL, 0, &n) == NULL && n == 0);
  CHECK(infer_result_prompt_logprobs(NULL, &n) == NULL && n == 0);
  CHECK(infer_result_prompt_logits(NULL, &n, &n) == NULL && n == 0);
  CHECK(infer_delta_text(NULL, &n) == NULL && n == 0);
  CHECK(infer_delta_tokens(NULL, &n) == NULL && n == 0);
  CHECK(infer_delta_finished(NULL) == 0);
  infer_engine_destroy(NULL);
  infer_result_destroy(NULL);
  infer_delta_destroy(NULL);
  infer_engine_params_init(NULL);
  infer_request_params_init(NULL);
  CHECK(strcmp(infer_finish_reason_name((infer_finish_reason)99), "unknown") == 0);
  CHECK(strcmp(infer_finish_reason_name(INFER_FINISH_CANCELLED), "cancelled") == 0);
  CHECK(strcmp(infer_status_name((infer_status)99), "INFER_ERR_UNKNOWN") == 0);
  CHECK(infer_chat_template_name((size_t)-1) == NULL);
  CHECK_FAILS(NULL, infer_log_set_level((infer_log_level)99), INFER_ERR_INVALID_ARGUMENT);

  /* Calls on an engine with bad arguments: the message goes to the engine, not to last_error. */
  e = create_engine(NULL);
  mark_error(NULL, buf, sizeof buf); /* a last_error that must survive every engine failure below */
  CHECK_FAILS(e, infer_engine_submit(e, NULL, &id), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_submit(e, &rp, NULL), INFER_ERR_INVALID_ARGUMENT);
  infer_request_params_init(&rp);
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT); /* no prompt */
  CHECK(strstr(infer_engine_error(e), "exactly one prompt") != NULL);
  rp.prompt = "Hello";
  rp.prompt_tokens = ids;
  rp.n_prompt_tokens = 1;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT); /* two prompts */
  rp.prompt = NULL;
  rp.prompt_tokens = NULL;
  rp.n_prompt_tokens = 3;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT);
  rp.prompt_tokens = &bad_token;
  rp.n_prompt_tokens = 1;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT); /* outside the vocabulary */
  CHECK(strstr(infer_engine_error(e), "1000") != NULL);
  infer_request_params_init(&rp);
  rp.n_messages = 1;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT); /* messages NULL */
  rp.messages = &bad_msg;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT); /* role NULL */
  rp.messages = &msg;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_NOT_FOUND); /* no chat template */
  infer_request_params_init(&rp);
  rp.prompt = "Hello";
  rp.n_stop = 1;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT); /* stop NULL */
  rp.stop = stop_null;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT); /* stop[0] NULL */
  rp.n_stop = 0;
  rp.top_logprobs = 21;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT);
  rp.top_logprobs = 0;
  rp.timeout_ms = -1;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT);
  rp.timeout_ms = 0;
  rp.max_tokens = -2;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT);
  rp.max_tokens = 4;
  rp.detached = 1;
  CHECK_FAILS(e, infer_engine_generate(e, &rp, &res), INFER_ERR_INVALID_ARGUMENT);
  rp.detached = 0;
  {
    /* A prompt longer than max_context (the model's 256). */
    int32_t long_prompt[300];
    size_t i;
    for (i = 0; i < 300; ++i) long_prompt[i] = 3 + (int32_t)(i % 200);
    infer_request_params_init(&rp);
    rp.prompt_tokens = long_prompt;
    rp.n_prompt_tokens = 300;
    CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_OUT_OF_RANGE);
  }
  CHECK_FAILS(e, infer_engine_read(e, 1, 0, NULL), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_read(e, 1, NAN, &delta), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_wait(e, 1, NULL), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_get_stats(e, NULL), INFER_ERR_INVALID_ARGUMENT);
  stats.struct_size = 0;
  CHECK_FAILS(e, infer_engine_get_stats(e, &stats), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_model_info(e, NULL), INFER_ERR_INVALID_ARGUMENT);
  info.struct_size = 3;
  CHECK_FAILS(e, infer_engine_model_info(e, &info), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_tokenize(e, NULL, 0, 1, 1, ids, 8, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_tokenize(e, "a", 1, 1, 1, ids, 8, NULL), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_tokenize(e, "a", 1, 1, 1, NULL, 8, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_detokenize(e, NULL, 2, 0, buf, sizeof buf, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_detokenize(e, &bad_token, 1, 0, buf, sizeof buf, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_detokenize(e, ids, 0, 0, buf, sizeof buf, NULL), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_detokenize(e, ids, 0, 0, NULL, 4, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_apply_chat_template(e, NULL, 1, 1, buf, sizeof buf, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_apply_chat_template(e, &bad_msg, 1, 1, buf, sizeof buf, &n), INFER_ERR_INVALID_ARGUMENT);
  CHECK_FAILS(e, infer_engine_apply_chat_template(e, &msg, 1, 1, buf, sizeof buf, &n), INFER_ERR_NOT_FOUND);
  CHECK(strstr(infer_last_error(), "marker-") != NULL); /* engine failures left last_error alone */

  /* A detached request can be neither read nor waited for. */
  {
    infer_request_id detached_id = 0;
    greedy_params(&rp, "Hello", 64);
    rp.detached = 1;
    CHECK_OK(e, infer_engine_submit(e, &rp, &detached_id));
    mark_error(e, g_marker, sizeof g_marker);
    {
      infer_status st = infer_engine_read(e, detached_id, 0, &delta);
      /* It may already have ended and been forgotten. */
      CHECK(st == INFER_ERR_INVALID_ARGUMENT || st == INFER_ERR_NOT_FOUND);
      CHECK(infer_engine_error(e)[0] != '\0' && strcmp(infer_engine_error(e), g_marker) != 0);
    }
  }

  /* The engine's message is the calling thread's: another thread sees none. */
  CHECK(pthread_create(&other, NULL, read_other_thread_error, e) == 0);
  CHECK(pthread_join(other, &other_clean) == 0);
  CHECK(other_clean == (void *)1);

  /* After shutdown, submit is refused with INFER_ERR_CANCELLED. */
  CHECK_OK(e, infer_engine_shutdown(e, 1));
  greedy_params(&rp, "Hello", 4);
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_CANCELLED);
  infer_engine_destroy(e);
}

/* ---- create -> submit -> stream -> cancel -> destroy -------------------------------------- */

static void case_stream_and_cancel(void) {
  infer_engine *e = create_engine(NULL);
  infer_request_params rp;
  infer_request_id id = 0, in_flight = 0;
  infer_result *res = NULL;
  int32_t streamed[256];
  size_t n_streamed = 0, n_ref = 0, n;
  char text[4096] = "";
  size_t text_len = 0;
  int finished = 0, cancelled = 0, reads = 0, attempt;
  infer_finish_reason reason = INFER_FINISH_NONE;
  int32_t *ref;

  /* The reference: the same greedy request, run to its end. */
  greedy_params(&rp, "Once upon a time", 200);
  ref = generate_ids(e, &rp, &n_ref);
  CHECK(n_ref == 200);

  /* The cancel races the engine: on a loaded machine all 200 tokens may be generated before it
   * lands. Such an attempt (ended by length, its stream the whole greedy run) is collected and the
   * request submitted again, at most 5 times: one attempt must end cancelled. */
  for (attempt = 0; attempt < 5; ++attempt) {
    n_streamed = 0;
    text_len = 0;
    text[0] = '\0';
    finished = cancelled = reads = 0;
    CHECK_OK(e, infer_engine_submit(e, &rp, &id));
    CHECK(id != 0);
    while (!finished && reads < 10000) {
      infer_delta *d = NULL;
      const int32_t *toks;
      const char *t;
      size_t len;
      ++reads;
      CHECK_OK(e, infer_engine_read(e, id, -1, &d));
      if (!d) break;
      toks = infer_delta_tokens(d, &n);
      CHECK((toks == NULL) == (n == 0));
      if (n_streamed + n <= 256) {
        if (n) memcpy(streamed + n_streamed, toks, n * sizeof *toks);
        n_streamed += n;
      }
      t = infer_delta_text(d, &len);
      CHECK(t != NULL && strlen(t) == len);
      if (text_len + len < sizeof text) {
        memcpy(text + text_len, t, len + 1);
        text_len += len;
      }
      finished = infer_delta_finished(d);
      reason = infer_delta_finish_reason(d);
      infer_delta_destroy(d);
      if (!cancelled && n_streamed >= 5) {
        CHECK_OK(e, infer_engine_cancel(e, id));
        cancelled = 1;
      }
    }
    if (!(finished && reason == INFER_FINISH_LENGTH && n_streamed == n_ref)) break;
    CHECK(memcmp(streamed, ref, n_ref * sizeof *ref) == 0);
    CHECK_OK(e, infer_engine_wait(e, id, &res));
    infer_result_destroy(res);
    res = NULL;
  }
  CHECK(attempt < 5);
  CHECK(finished && reason == INFER_FINISH_CANCELLED);
  CHECK(n_streamed >= 5 && n_streamed < 200);
  /* The streamed tokens are the greedy run's, up to the cancel. */
  CHECK(n_streamed <= n_ref && memcmp(streamed, ref, n_streamed * sizeof *ref) == 0);
  /* An ended request stays readable (and cancellable) until it is collected. */
  {
    infer_delta *d = NULL;
    CHECK_OK(e, infer_engine_read(e, id, 0, &d));
    CHECK(d && infer_delta_finished(d) && infer_delta_tokens(d, &n) == NULL && n == 0);
    infer_delta_destroy(d);
  }
  CHECK_OK(e, infer_engine_cancel(e, id));
  CHECK_OK(e, infer_engine_wait(e, id, &res));
  CHECK(res != NULL);
  if (res) {
    size_t len;
    const char *t = infer_result_text(res, &len);
    CHECK(infer_result_finish_reason(res) == INFER_FINISH_CANCELLED);
    CHECK(infer_result_status(res) == INFER_ERR_CANCELLED);
    CHECK(infer_result_error(res)[0] != '\0');
    /* The result holds what was streamed, no more, no less. */
    CHECK(same_ids(infer_result_tokens(res), infer_result_n_tokens(res), streamed, n_streamed));
    CHECK(len == text_len && strcmp(t, text) == 0);
    infer_result_destroy(res);
  }
  /* Collected: the id is forgotten. */
  CHECK_FAILS(e, infer_engine_cancel(e, id), INFER_ERR_NOT_FOUND);

  /* A request that runs to its length, streamed with short timeouts. */
  greedy_params(&rp, "Once upon a time", 8);
  CHECK_OK(e, infer_engine_submit(e, &rp, &id));
  n_streamed = 0;
  finished = 0;
  for (reads = 0; !finished && reads < 100000; ++reads) {
    infer_delta *d = NULL;
    const int32_t *toks;
    CHECK_OK(e, infer_engine_read(e, id, 1.0, &d));
    if (!d) break;
    toks = infer_delta_tokens(d, &n);
    if (n_streamed + n <= 256 && n) memcpy(streamed + n_streamed, toks, n * sizeof *toks);
    n_streamed += n;
    finished = infer_delta_finished(d);
    reason = infer_delta_finish_reason(d);
    infer_delta_destroy(d);
  }
  CHECK(finished && reason == INFER_FINISH_LENGTH);
  CHECK(same_ids(streamed, n_streamed, ref, 8));
  CHECK_OK(e, infer_engine_wait(e, id, &res));
  CHECK(res && infer_result_finish_reason(res) == INFER_FINISH_LENGTH && infer_result_status(res) == INFER_OK);
  CHECK(res && infer_result_error(res)[0] == '\0');
  infer_result_destroy(res);

  /* Destroying an engine with a request in flight cancels it and frees everything. */
  greedy_params(&rp, "Once upon a time", 200);
  CHECK_OK(e, infer_engine_submit(e, &rp, &in_flight));
  free(ref);
  infer_engine_destroy(e);
}

/* ---- the token callback ----------------------------------------------------------------- */

typedef struct {
  infer_request_id id;
  int tokens;           /* token events seen */
  int finals;           /* final events seen */
  int cancel_after;     /* return nonzero at this many tokens (0: never) */
  infer_finish_reason final_reason;
  char text[4096];
  size_t text_len;
  int text_ok;          /* every event's text was NUL-terminated at text_len */
  double logprobs[64];   /* each token event's logprob */
  /* For the detached case: the worker waits at the first token until the host has probed. */
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int hold_first, released, done;
} CallbackState;

static int on_token(const infer_token_event *ev, void *user_data) {
  CallbackState *s = (CallbackState *)user_data;
  if (strlen(ev->text) != ev->text_len) s->text_ok = 0;
  if (s->text_len + ev->text_len < sizeof s->text) {
    memcpy(s->text + s->text_len, ev->text, ev->text_len + 1);
    s->text_len += ev->text_len;
  }
  if (ev->finished) {
    CHECK(ev->token == -1);
    pthread_mutex_lock(&s->mutex);
    ++s->finals;
    s->final_reason = ev->reason;
    s->done = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mutex);
    return 1; /* ignored: nothing is left to cancel */
  }
  if (s->tokens < 64) s->logprobs[s->tokens] = ev->logprob;
  ++s->tokens;
  if (s->hold_first && s->tokens == 1) {
    pthread_mutex_lock(&s->mutex);
    while (!s->released) pthread_cond_wait(&s->cond, &s->mutex);
    pthread_mutex_unlock(&s->mutex);
  }
  return s->cancel_after > 0 && s->tokens >= s->cancel_after;
}

static void callback_state_init(CallbackState *s) {
  memset(s, 0, sizeof *s);
  s->text_ok = 1;
  pthread_mutex_init(&s->mutex, NULL);
  pthread_cond_init(&s->cond, NULL);
}

static void callback_state_free(CallbackState *s) {
  pthread_mutex_destroy(&s->mutex);
  pthread_cond_destroy(&s->cond);
}

static void case_callback(void) {
  infer_engine *e = create_engine(NULL);
  infer_request_params rp;
  infer_request_id id = 0;
  infer_result *res = NULL;
  CallbackState s;

  /* Returning nonzero after 3 tokens cancels: at most one more token is made. */
  callback_state_init(&s);
  s.cancel_after = 3;
  greedy_params(&rp, "Once upon a time", 200);
  rp.on_token = on_token;
  rp.user_data = &s;
  CHECK_OK(e, infer_engine_submit(e, &rp, &id));
  CHECK_OK(e, infer_engine_wait(e, id, &res));
  CHECK(res != NULL);
  if (res) {
    const size_t n = infer_result_n_tokens(res);
    CHECK(infer_result_finish_reason(res) == INFER_FINISH_CANCELLED);
    CHECK(n >= 3 && n <= 4);
    CHECK(s.tokens == (int)n);
    CHECK(s.finals == 1 && s.final_reason == INFER_FINISH_CANCELLED);
    CHECK(s.text_ok);
    CHECK(strcmp(s.text, infer_result_text(res, NULL)) == 0);
    infer_result_destroy(res);
  }
  callback_state_free(&s);

  /* A callback that never cancels sees every token and the final event, with the logprobs. */
  callback_state_init(&s);
  greedy_params(&rp, "Once upon a time", 12);
  rp.on_token = on_token;
  rp.user_data = &s;
  rp.logprobs = 1;
  CHECK_OK(e, infer_engine_generate(e, &rp, &res));
  if (res) {
    size_t n, i;
    const infer_token_logprob *lp = infer_result_logprobs(res, &n);
    CHECK(s.tokens == 12 && s.finals == 1 && s.final_reason == INFER_FINISH_LENGTH);
    CHECK(lp != NULL && n == 12);
    for (i = 0; lp && i < n && i < 64; ++i) CHECK(s.logprobs[i] == lp[i].logprob);
    infer_result_destroy(res);
  }
  callback_state_free(&s);

  /* Detached: output goes to the callback only; read and wait refuse it while it runs, and the
   * engine forgets it once it ends. */
  callback_state_init(&s);
  s.hold_first = 1;
  greedy_params(&rp, "Once upon a time", 6);
  rp.on_token = on_token;
  rp.user_data = &s;
  rp.detached = 1;
  CHECK_OK(e, infer_engine_submit(e, &rp, &id));
  {
    infer_delta *d = NULL;
    int i;
    CHECK_FAILS(e, infer_engine_read(e, id, 0, &d), INFER_ERR_INVALID_ARGUMENT);
    CHECK_FAILS(e, infer_engine_wait(e, id, &res), INFER_ERR_INVALID_ARGUMENT);
    pthread_mutex_lock(&s.mutex);
    s.released = 1;
    pthread_cond_broadcast(&s.cond);
    while (!s.done) pthread_cond_wait(&s.cond, &s.mutex);
    pthread_mutex_unlock(&s.mutex);
    CHECK(s.tokens == 6 && s.final_reason == INFER_FINISH_LENGTH);
    /* Forgotten right after its final event is delivered. */
    for (i = 0; i < 5000 && infer_engine_cancel(e, id) == INFER_OK; ++i) sleep_ms(1);
    CHECK_FAILS(e, infer_engine_cancel(e, id), INFER_ERR_NOT_FOUND);
  }
  callback_state_free(&s);
  infer_engine_destroy(e);
}

/* ---- struct_size: older and newer callers ------------------------------------------------- */

static void case_struct_size(void) {
  infer_engine *e;
  infer_engine_params ep;
  infer_request_params rp, *big;
  infer_result *res = NULL;
  infer_request_id id;
  int32_t *ref;
  size_t n_ref, n;
  unsigned char raw[sizeof(infer_engine_stats) + 64];
  infer_engine_stats *stats = (infer_engine_stats *)(void *)raw;

  /* An older caller's engine params: only model_path and n_threads; the rest is garbage that
   * must not be read. */
  memset(&ep, 0xAB, sizeof ep);
  ep.struct_size = offsetof(infer_engine_params, n_threads) + sizeof(int32_t);
  ep.model_path = g_model;
  ep.n_threads = 2;
  e = NULL;
  CHECK_OK(NULL, infer_engine_create(&ep, &e));
  if (!e) {
    fprintf(stderr, "%s\n", infer_last_error());
    ++g_failures;
    return;
  }

  greedy_params(&rp, "Once upon a time", 8);
  ref = generate_ids(e, &rp, &n_ref);
  CHECK(n_ref == 8);

  /* An older caller's request params end at temperature; max_tokens and temperature are read,
   * top_k, stop, on_token, ... take their defaults (with ignore_eos off, the run may stop early
   * at an end-of-generation token, but never differs from the reference). */
  memset(&rp, 0xAB, sizeof rp);
  rp.struct_size = offsetof(infer_request_params, temperature) + sizeof(float);
  rp.prompt = "Once upon a time";
  rp.prompt_tokens = NULL;
  rp.n_prompt_tokens = 0;
  rp.messages = NULL;
  rp.n_messages = 0;
  rp.add_special = 1;
  rp.parse_special = 1;
  rp.max_tokens = 8;
  rp.temperature = 0;
  CHECK_OK(e, infer_engine_generate(e, &rp, &res));
  if (res) {
    n = infer_result_n_tokens(res);
    CHECK(n >= 1 && n <= 8 && memcmp(infer_result_tokens(res), ref, n * sizeof *ref) == 0);
    CHECK(n == 8 || infer_result_finish_reason(res) == INFER_FINISH_STOP);
    infer_result_destroy(res);
  }
  /* A newer caller's larger struct: accepted while its unknown tail is zero. */
  big = calloc(1, sizeof(infer_request_params) + 32);
  greedy_params(big, "Once upon a time", 8);
  big->struct_size = sizeof(infer_request_params) + 32;
  CHECK_OK(e, infer_engine_generate(e, big, &res));
  CHECK(res && same_ids(infer_result_tokens(res), infer_result_n_tokens(res), ref, n_ref));
  infer_result_destroy(res);
  ((unsigned char *)big)[sizeof(infer_request_params) + 17] = 1;
  CHECK_FAILS(e, infer_engine_submit(e, big, &id), INFER_ERR_INVALID_ARGUMENT);
  CHECK(strstr(infer_engine_error(e), "struct_size") != NULL);
  free(big);
  greedy_params(&rp, "Once upon a time", 8);
  rp.struct_size = sizeof(size_t) - 1;
  CHECK_FAILS(e, infer_engine_submit(e, &rp, &id), INFER_ERR_INVALID_ARGUMENT);

  /* An older caller's init: the library writes its defaults no further than the caller's size,
   * and zeros into a newer caller's fields it does not know. */
  {
    unsigned char buf[sizeof(infer_request_params) + 16];
    const size_t old_size = offsetof(infer_request_params, temperature) + sizeof(float);
    infer_request_params *p = (infer_request_params *)(void *)buf;
    memset(buf, 0xEE, sizeof buf);
    infer_request_params_init_sized(p, old_size);
    CHECK(p->struct_size == old_size && p->max_tokens == 256 && p->temperature > 0.79f && p->temperature < 0.81f);
    CHECK(buf[old_size] == 0xEE && buf[sizeof buf - 1] == 0xEE);
    memset(buf, 0xEE, sizeof buf);
    infer_request_params_init_sized(p, sizeof buf);
    CHECK(p->struct_size == sizeof buf && buf[sizeof(infer_request_params)] == 0 && buf[sizeof buf - 1] == 0);
    CHECK(p->prompt_logprobs_from == -1 && p->add_special == 1);
    memset(buf, 0xEE, sizeof buf);
    infer_request_params_init_sized(p, sizeof(size_t) - 1);
    CHECK(buf[0] == 0xEE);
  }

  /* Output structs: written up to struct_size, never past it. */
  memset(raw, 0xCD, sizeof raw);
  stats->struct_size = offsetof(infer_engine_stats, waiting);
  CHECK_OK(e, infer_engine_get_stats(e, stats));
  CHECK(stats->uptime_s > 0 && stats->running == 0);
  CHECK(raw[offsetof(infer_engine_stats, waiting)] == 0xCD && raw[sizeof raw - 1] == 0xCD);
  /* A newer caller's larger struct: the fields this library does not know read as zero. */
  memset(raw, 0xCD, sizeof raw);
  stats->struct_size = sizeof(infer_engine_stats) + 32;
  CHECK_OK(e, infer_engine_get_stats(e, stats));
  CHECK(stats->generated_tokens >= 16 && stats->struct_size == sizeof(infer_engine_stats) + 32);
  CHECK(raw[sizeof(infer_engine_stats)] == 0 && raw[sizeof(infer_engine_stats) + 31] == 0);
  CHECK(raw[sizeof(infer_engine_stats) + 32] == 0xCD);
  {
    infer_model_info info;
    memset(&info, 0xCD, sizeof info);
    info.struct_size = offsetof(infer_model_info, n_vocab) + sizeof(int64_t);
    CHECK_OK(e, infer_engine_model_info(e, &info));
    CHECK(info.n_vocab == 259);
    CHECK(((unsigned char *)&info)[offsetof(infer_model_info, n_ctx)] == 0xCD);
  }
  free(ref);
  infer_engine_destroy(e);
}

/* ---- 8 threads at once -------------------------------------------------------------------- */

#define N_THREADS 8
static const char *const kPrompts[4] = {"Once upon a time", "The quick brown fox", "In the beginning", "Hello, world"};

typedef struct {
  infer_engine *engine;
  int index;
  const int32_t *ref; /* the single-threaded greedy ids of its prompt */
  size_t n_ref;
  int ok;
} ThreadJob;

static void *thread_main(void *arg) {
  ThreadJob *job = (ThreadJob *)arg;
  infer_request_params rp;
  int round;
  job->ok = 1;
  for (round = 0; round < 3; ++round) {
    size_t n;
    int32_t *ids;
    infer_request_id id = 0;
    infer_status st;
    int32_t bad = 1000 + job->index;
    char expect[32];
    greedy_params(&rp, kPrompts[job->index % 4], 16);
    ids = run_ids(job->engine, &rp, &n, &st);
    if (st != INFER_OK || !same_ids(ids, n, job->ref, job->n_ref)) job->ok = 0;
    free(ids);
    /* Each thread reads its own failure's message, never another thread's. */
    infer_request_params_init(&rp);
    rp.prompt_tokens = &bad;
    rp.n_prompt_tokens = 1;
    if (infer_engine_submit(job->engine, &rp, &id) != INFER_ERR_INVALID_ARGUMENT) job->ok = 0;
    snprintf(expect, sizeof expect, "%d", (int)bad);
    if (!strstr(infer_engine_error(job->engine), expect)) job->ok = 0;
  }
  return NULL;
}

static void case_threads(void) {
  infer_engine *e = create_engine(NULL);
  int32_t *refs[4];
  size_t n_refs[4];
  pthread_t threads[N_THREADS];
  ThreadJob jobs[N_THREADS];
  int i;
  for (i = 0; i < 4; ++i) {
    infer_request_params rp;
    greedy_params(&rp, kPrompts[i], 16);
    refs[i] = generate_ids(e, &rp, &n_refs[i]);
    CHECK(n_refs[i] == 16);
  }
  for (i = 0; i < N_THREADS; ++i) {
    jobs[i].engine = e;
    jobs[i].index = i;
    jobs[i].ref = refs[i % 4];
    jobs[i].n_ref = n_refs[i % 4];
    jobs[i].ok = 0;
    CHECK(pthread_create(&threads[i], NULL, thread_main, &jobs[i]) == 0);
  }
  for (i = 0; i < N_THREADS; ++i) {
    CHECK(pthread_join(threads[i], NULL) == 0);
    if (!jobs[i].ok) fprintf(stderr, "thread %d: greedy ids or its error message differ\n", i);
    CHECK(jobs[i].ok);
  }
  for (i = 0; i < 4; ++i) free(refs[i]);
  infer_engine_destroy(e);
}

/* ---- unknown ids ---------------------------------------------------------------------------- */

static void case_unknown_ids(void) {
  infer_engine *e = create_engine(NULL);
  infer_delta *d = (infer_delta *)1;
  infer_result *res = (infer_result *)1;
  infer_request_params rp;
  infer_request_id id = 0;
  CHECK_FAILS(e, infer_engine_cancel(e, 424242), INFER_ERR_NOT_FOUND);
  CHECK_FAILS(e, infer_engine_read(e, 424242, 0, &d), INFER_ERR_NOT_FOUND);
  CHECK(d == NULL);
  CHECK_FAILS(e, infer_engine_wait(e, 424242, &res), INFER_ERR_NOT_FOUND);
  CHECK(res == NULL);
  CHECK_FAILS(e, infer_engine_cancel(e, 0), INFER_ERR_NOT_FOUND);
  /* A collected id is unknown too. */
  greedy_params(&rp, "Hello", 2);
  CHECK_OK(e, infer_engine_submit(e, &rp, &id));
  CHECK_OK(e, infer_engine_wait(e, id, &res));
  infer_result_destroy(res);
  CHECK_FAILS(e, infer_engine_read(e, id, 0, &d), INFER_ERR_NOT_FOUND);
  CHECK_FAILS(e, infer_engine_wait(e, id, &res), INFER_ERR_NOT_FOUND);
  CHECK_FAILS(e, infer_engine_cancel(e, id), INFER_ERR_NOT_FOUND);
  infer_engine_destroy(e);
}

/* ---- text: tokenize, detokenize, chat templates --------------------------------------------- */

static void case_text(void) {
  infer_engine *e = create_engine(NULL);
  infer_model_info info;
  int32_t ids[64], sentinel[64];
  size_t n = 0, n2 = 0, len = 0, i;
  char buf[256];
  const char *text = "Hello world";
  const char *escaped = "\xe2\x96\x81Hello\xe2\x96\x81world";

  info.struct_size = sizeof info;
  CHECK_OK(e, infer_engine_model_info(e, &info));

  /* Size protocol: the count comes back with OUT_OF_RANGE and nothing is written. */
  CHECK_FAILS(e, infer_engine_tokenize(e, text, strlen(text), 1, 1, NULL, 0, &n), INFER_ERR_OUT_OF_RANGE);
  CHECK(n > 1 && n < 64);
  for (i = 0; i < 64; ++i) sentinel[i] = ids[i] = -7;
  CHECK_FAILS(e, infer_engine_tokenize(e, text, strlen(text), 1, 1, ids, n - 1, &n2), INFER_ERR_OUT_OF_RANGE);
  CHECK(n2 == n && memcmp(ids, sentinel, sizeof ids) == 0);
  CHECK_OK(e, infer_engine_tokenize(e, text, strlen(text), 1, 1, ids, n, &n2));
  CHECK(n2 == n && ids[0] == info.bos && ids[n] == -7);
  /* Only text[0, len) counts: no NUL needed. */
  {
    int32_t again[64];
    CHECK_OK(e, infer_engine_tokenize(e, "Hello worldXYZ", strlen(text), 1, 1, again, 64, &n2));
    CHECK(same_ids(again, n2, ids, n));
    CHECK_OK(e, infer_engine_tokenize(e, text, strlen(text), 0, 1, again, 64, &n2));
    CHECK(n2 == n - 1 && memcmp(again, ids + 1, n2 * sizeof *ids) == 0); /* without BOS */
  }

  /* Round trip, and the same protocol for text (the NUL needs its byte). SentencePiece writes a
   * space (and the prefix space) as U+2581; this byte-only vocabulary has no piece for it, so its
   * UTF-8 bytes come back as they are, as llama.cpp decodes them too. */
  CHECK_FAILS(e, infer_engine_detokenize(e, ids + 1, n - 1, 0, NULL, 0, &len), INFER_ERR_OUT_OF_RANGE);
  CHECK(len == strlen(escaped));
  memset(buf, 'x', sizeof buf);
  CHECK_FAILS(e, infer_engine_detokenize(e, ids + 1, n - 1, 0, buf, len, &len), INFER_ERR_OUT_OF_RANGE);
  CHECK(buf[0] == 'x' && buf[len - 1] == 'x');
  CHECK_OK(e, infer_engine_detokenize(e, ids + 1, n - 1, 0, buf, len + 1, &len));
  CHECK(strcmp(buf, escaped) == 0);
  CHECK_OK(e, infer_engine_detokenize(e, NULL, 0, 0, buf, sizeof buf, &len));
  CHECK(len == 0 && buf[0] == '\0');
  CHECK_OK(e, infer_engine_detokenize(e, ids, 1, 1, buf, sizeof buf, &len)); /* BOS rendered */
  CHECK(len > 0);

  /* A prompt given as ids generates what the same prompt as text does. */
  {
    infer_request_params rp;
    int32_t *a, *b;
    size_t na, nb;
    greedy_params(&rp, text, 8);
    a = generate_ids(e, &rp, &na);
    greedy_params(&rp, NULL, 8);
    rp.prompt_tokens = ids;
    rp.n_prompt_tokens = n;
    b = generate_ids(e, &rp, &nb);
    CHECK(na == 8 && same_ids(a, na, b, nb));
    free(a);
    free(b);
  }
  infer_engine_destroy(e);

  /* Chat formats: a list of distinct names, NULL past the last; an engine built with one
   * renders conversations and serves messages. */
  {
    size_t count = 0, j;
    const char *chatml = NULL;
    for (i = 0; infer_chat_template_name(i) != NULL; ++i) {
      CHECK(infer_chat_template_name(i)[0] != '\0');
      for (j = 0; j < i; ++j) CHECK(strcmp(infer_chat_template_name(i), infer_chat_template_name(j)) != 0);
      if (strcmp(infer_chat_template_name(i), "chatml") == 0) chatml = infer_chat_template_name(i);
      ++count;
    }
    CHECK(count > 0 && chatml != NULL);
    if (chatml) {
      infer_chat_message conv[2] = {{"system", "Be brief."}, {"user", "Hi there"}};
      char *rendered;
      size_t need = 0;
      infer_request_params rp;
      infer_result *res = NULL;
      e = create_engine(chatml);
      info.struct_size = sizeof info;
      CHECK_OK(e, infer_engine_model_info(e, &info));
      CHECK(strcmp(info.chat_template, "chatml") == 0);
      CHECK_FAILS(e, infer_engine_apply_chat_template(e, conv, 2, 1, NULL, 0, &need), INFER_ERR_OUT_OF_RANGE);
      CHECK(need > strlen("Be brief.Hi there"));
      rendered = malloc(need + 1);
      CHECK_OK(e, infer_engine_apply_chat_template(e, conv, 2, 1, rendered, need + 1, &len));
      CHECK(len == need && strlen(rendered) == need);
      CHECK(strstr(rendered, "Be brief.") && strstr(rendered, "Hi there") && strstr(rendered, "<|im_start|>assistant"));
      free(rendered);
      infer_request_params_init(&rp);
      rp.messages = conv;
      rp.n_messages = 2;
      rp.max_tokens = 4;
      rp.temperature = 0;
      CHECK_OK(e, infer_engine_generate(e, &rp, &res));
      CHECK(res && infer_result_status(res) == INFER_OK);
      infer_result_destroy(res);
      infer_engine_destroy(e);
    }
  }
  /* A Jinja template given as text, with extra variables: a conversation in JSON reaches it with
   * every key (tools, a tool call); a raising template's message comes back; bad JSON and a
   * template that does not parse are invalid arguments. */
  {
    static const char *tmpl =
        "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}"
        "{% if m.tool_calls %} calls {{ m.tool_calls[0].function.name }}{% endif %}]{% endfor %}"
        "{% if tools %} tools={{ tools|length }}{% endif %} think={{ enable_thinking }}"
        "{% if messages|length > 3 %}{{ raise_exception('too long: ' ~ messages|length) }}{% endif %}";
    static const char *conv =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"\", "
        "\"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": {}}}]}], \"tools\": [{}, {}]}";
    static const char *too_long = "{\"messages\": [{}, {}, {}, {}]}";
    char out[512];
    infer_engine_params p;
    infer_engine *je = NULL;
    infer_engine_params_init(&p);
    p.model_path = g_model;
    p.n_threads = 2;
    p.kv_cache_tokens = 4096;
    p.chat_template_text = tmpl;
    p.chat_template_variables = "{\"enable_thinking\": false}";
    CHECK_OK(NULL, infer_engine_create(&p, &je));
    if (je) {
      infer_model_info mi;
      mi.struct_size = sizeof mi;
      CHECK_OK(je, infer_engine_model_info(je, &mi));
      CHECK(strcmp(mi.chat_template, "jinja") == 0);
      CHECK_OK(je, infer_engine_apply_chat_template_json(je, conv, out, sizeof out, &len));
      CHECK(strcmp(out, "<s>[user:Hi][assistant: calls f] tools=2 think=False") == 0);
      CHECK_FAILS(je, infer_engine_apply_chat_template_json(je, too_long, out, sizeof out, &len), INFER_ERR_INVALID_ARGUMENT);
      CHECK(strstr(infer_engine_error(je), "raise_exception: too long: 4") != NULL);
      CHECK_FAILS(je, infer_engine_apply_chat_template_json(je, "{\"messages\": [", out, sizeof out, &len), INFER_ERR_INVALID_ARGUMENT);
      CHECK_FAILS(je, infer_engine_apply_chat_template_json(je, NULL, out, sizeof out, &len), INFER_ERR_INVALID_ARGUMENT);
      infer_engine_destroy(je);
    }
    p.chat_template_text = "{% for %}";
    CHECK(infer_engine_create(&p, &je) == INFER_ERR_INVALID_ARGUMENT && strstr(infer_last_error(), "line 1") != NULL);
    p.chat_template_text = tmpl;
    p.chat_template = "chatml";
    CHECK(infer_engine_create(&p, &je) == INFER_ERR_INVALID_ARGUMENT);
  }
}

/* ---- model info, statistics, metrics ----------------------------------------------------- */

static void case_info_stats(void) {
  infer_engine *e = create_engine(NULL);
  infer_model_info info;
  infer_engine_stats st;
  infer_request_metrics m;
  infer_request_params rp;
  infer_result *res = NULL;
  int32_t ids[64];
  size_t n_prompt = 0;

  info.struct_size = sizeof info;
  CHECK_OK(e, infer_engine_model_info(e, &info));
  /* What infer-make-model was told to write. */
  CHECK(strcmp(info.architecture, "llama") == 0);
  CHECK(info.name != NULL && info.chat_template != NULL && info.chat_template[0] == '\0');
  CHECK(info.n_vocab == 259 && info.n_embd == 64 && info.n_layer == 2 && info.n_head == 4 && info.n_head_kv == 2);
  CHECK(info.n_ctx_train == 256 && info.n_ctx == 256);
  CHECK(info.bos == 1 && info.eos == 2);
  /* F32 weights: four bytes each. */
  CHECK(info.n_params > 0 && info.size_bytes == (uint64_t)info.n_params * 4);
  CHECK(info.file_type != NULL && strcmp(info.file_type, "all F32") == 0); /* general.file_type 0 */

  st.struct_size = sizeof st;
  CHECK_OK(e, infer_engine_get_stats(e, &st));
  CHECK(st.generated_tokens == 0 && st.requests_finished == 0 && st.kv_blocks_used == 0);
  CHECK(st.kv_blocks_total > 0 && st.kv_blocks_total == st.kv_blocks_used + st.kv_blocks_cached + st.kv_blocks_free);
  CHECK(st.n_threads >= 1 && st.n_threads <= 2); /* n_threads 2, clamped to the hardware's */

  greedy_params(&rp, "Once upon a time", 10);
  CHECK_OK(e, infer_engine_tokenize(e, rp.prompt, strlen(rp.prompt), 1, 1, ids, 64, &n_prompt));
  CHECK_OK(e, infer_engine_generate(e, &rp, &res));
  CHECK(res != NULL);
  if (!res) return;
  m.struct_size = sizeof m;
  CHECK_OK(NULL, infer_result_metrics(res, &m));
  CHECK(m.generated_tokens == 10 && (size_t)m.generated_tokens == infer_result_n_tokens(res));
  CHECK(m.prompt_tokens == (int64_t)n_prompt && m.cached_tokens == 0 && m.preemptions == 0);
  CHECK(m.queue_ms >= 0 && m.queue_ms <= m.ttft_ms && m.ttft_ms <= m.e2e_ms && m.e2e_ms > 0 && m.tpot_ms >= 0);
  {
    /* A truncated metrics struct: only queue_ms is written. */
    unsigned char raw[sizeof(infer_request_metrics)];
    infer_request_metrics *small = (infer_request_metrics *)(void *)raw;
    memset(raw, 0xCD, sizeof raw);
    small->struct_size = offsetof(infer_request_metrics, queue_ms) + sizeof(double);
    CHECK_OK(NULL, infer_result_metrics(res, small));
    CHECK(small->queue_ms == m.queue_ms && raw[offsetof(infer_request_metrics, ttft_ms)] == 0xCD);
    small->struct_size = 2;
    CHECK_FAILS(NULL, infer_result_metrics(res, small), INFER_ERR_INVALID_ARGUMENT);
  }
  infer_result_destroy(res);

  CHECK_OK(e, infer_engine_get_stats(e, &st));
  CHECK(st.generated_tokens == 10 && st.requests_finished == 1 && st.prompt_tokens == (int64_t)n_prompt);
  CHECK(st.running == 0 && st.waiting == 0 && st.steps > 0 && st.uptime_s > 0);
  /* After wait, the request holds no KV block; its full blocks may stay cached. */
  CHECK(st.kv_blocks_used == 0);
  CHECK(st.kv_blocks_total == st.kv_blocks_used + st.kv_blocks_cached + st.kv_blocks_free);
  CHECK(st.ttft_ms.count == 1 && st.e2e_ms.count == 1 && st.e2e_ms.p50 >= st.ttft_ms.p50);
  infer_engine_destroy(e);
}

/* ---- log-probabilities --------------------------------------------------------------------- */

static void case_logprobs(void) {
  infer_engine *e = create_engine(NULL);
  infer_request_params rp;
  infer_result *res = NULL;
  int32_t prompt[64];
  size_t n_prompt = 0, n, i, j;

  greedy_params(&rp, "Once upon a time", 12);
  rp.logprobs = 1;
  rp.top_logprobs = 5;
  rp.prompt_logprobs_from = 1;
  rp.prompt_top_logprobs = 3;
  rp.prompt_logits = 1;
  CHECK_OK(e, infer_engine_tokenize(e, rp.prompt, strlen(rp.prompt), 1, 1, prompt, 64, &n_prompt));
  CHECK_OK(e, infer_engine_generate(e, &rp, &res));
  CHECK(res != NULL);
  if (!res) return;
  {
    const infer_token_logprob *lp = infer_result_logprobs(res, &n);
    const int32_t *toks = infer_result_tokens(res);
    CHECK(lp != NULL && n == infer_result_n_tokens(res) && n == 12);
    for (i = 0; lp && i < n; ++i) {
      size_t nt = 0;
      const infer_token_logprob *top = infer_result_top_logprobs(res, i, &nt);
      CHECK(lp[i].token == toks[i] && lp[i].logprob <= 0);
      CHECK(top != NULL && nt == 5);
      for (j = 0; top && j < nt; ++j) {
        CHECK(top[j].logprob <= 0);
        if (j) CHECK(top[j - 1].logprob >= top[j].logprob);
      }
      /* Greedy: the chosen token is the most likely one. */
      if (top) CHECK(top[0].token == lp[i].token && top[0].logprob == lp[i].logprob);
    }
    CHECK(infer_result_top_logprobs(res, n, &n) == NULL && n == 0);
  }
  {
    /* Prompt scoring: tokens [1, n_prompt) with their log-probabilities, each equal to the
     * log-softmax (computed here) of the logits row that predicts it. */
    size_t rows = 0, vocab = 0;
    const infer_token_logprob *plp = infer_result_prompt_logprobs(res, &n);
    const float *logits = infer_result_prompt_logits(res, &rows, &vocab);
    CHECK(plp != NULL && n == n_prompt - 1);
    CHECK(logits != NULL && rows == n && vocab == 259);
    for (i = 0; plp && logits && i < n && rows == n && vocab == 259; ++i) {
      const float *row = logits + i * vocab;
      double mx = row[0], z = 0, expect;
      size_t nt = 0;
      const infer_token_logprob *top = infer_result_prompt_top_logprobs(res, i, &nt);
      for (j = 1; j < vocab; ++j) mx = row[j] > mx ? row[j] : mx;
      for (j = 0; j < vocab; ++j) z += exp((double)row[j] - mx);
      expect = ((double)row[prompt[i + 1]] - mx) - log(z);
      CHECK(plp[i].token == prompt[i + 1]);
      CHECK(fabs(plp[i].logprob - expect) < 1e-4);
      CHECK(top != NULL && nt == 3);
      for (j = 1; top && j < nt; ++j) CHECK(top[j - 1].logprob >= top[j].logprob);
      if (top) CHECK(top[0].logprob >= plp[i].logprob);
    }
  }
  infer_result_destroy(res);

  /* Without logprobs: no arrays. */
  greedy_params(&rp, "Once upon a time", 4);
  CHECK_OK(e, infer_engine_generate(e, &rp, &res));
  CHECK(res && infer_result_logprobs(res, &n) == NULL && n == 0);
  CHECK(res && infer_result_prompt_logprobs(res, &n) == NULL && n == 0);
  CHECK(res && infer_result_prompt_logits(res, &n, &n) == NULL && n == 0);
  infer_result_destroy(res);
  infer_engine_destroy(e);
}

/* ---- greedy ids, for the comparison with infer-generate ------------------------------------ */

static int print_greedy_ids(const char *prompt) {
  infer_engine *e = create_engine(NULL);
  infer_request_params rp;
  infer_result *res = NULL;
  size_t i;
  infer_request_params_init(&rp);
  rp.prompt = prompt;
  rp.temperature = 0;
  rp.max_tokens = 16;
  if (infer_engine_generate(e, &rp, &res) != INFER_OK) {
    fprintf(stderr, "%s\n", infer_engine_error(e));
    infer_engine_destroy(e);
    return 1;
  }
  for (i = 0; i < infer_result_n_tokens(res); ++i) printf(i ? " %d" : "%d", (int)infer_result_tokens(res)[i]);
  printf("\n");
  infer_result_destroy(res);
  infer_engine_destroy(e);
  return 0;
}

/* ---- priority preemption ----------------------------------------------------------------- */

typedef struct {
  infer_engine *engine;
  infer_request_id high;
  int submitted;
  infer_status submit_status;
} PreemptState;

/* On the low-priority request's first token (it is running, alone in the one slot), submits a
 * higher-priority one from the callback, as the header allows. */
static int submit_high_on_first_token(const infer_token_event *ev, void *user_data) {
  PreemptState *s = (PreemptState *)user_data;
  infer_request_params rp;
  if (ev->finished || s->submitted) return 0;
  s->submitted = 1;
  greedy_params(&rp, "A higher priority", 4);
  rp.priority = 5;
  s->submit_status = infer_engine_submit(s->engine, &rp, &s->high);
  return 0;
}

static void case_priority_preemption(void) {
  infer_engine_params p;
  infer_request_params rp;
  infer_request_metrics m;
  int32_t *ref;
  size_t n_ref;
  int on;
  infer_engine_params_init(&p);
  CHECK(p.priority_preemption == 0);
  for (on = 0; on <= 1; ++on) {
    infer_engine *e = NULL;
    infer_result *low = NULL, *high = NULL;
    infer_request_id id = 0;
    PreemptState s;
    infer_engine_params_init(&p);
    p.model_path = g_model;
    p.n_threads = 2;
    p.kv_cache_tokens = 4096;
    p.max_sequences = 1;
    p.priority_preemption = on;
    CHECK_OK(NULL, infer_engine_create(&p, &e));
    if (!e) return;
    greedy_params(&rp, "Once upon a time", 24);
    ref = generate_ids(e, &rp, &n_ref); /* alone */
    memset(&s, 0, sizeof s);
    s.engine = e;
    rp.on_token = submit_high_on_first_token;
    rp.user_data = &s;
    CHECK_OK(e, infer_engine_submit(e, &rp, &id));
    CHECK_OK(e, infer_engine_wait(e, id, &low));
    CHECK(s.submitted && s.submit_status == INFER_OK);
    if (low) {
      m.struct_size = sizeof m;
      CHECK_OK(e, infer_result_metrics(low, &m));
      CHECK(m.preemptions == on); /* off: the higher-priority request waited for the slot */
      CHECK(same_ids(infer_result_tokens(low), infer_result_n_tokens(low), ref, n_ref));
    }
    if (s.submit_status == INFER_OK) {
      CHECK_OK(e, infer_engine_wait(e, s.high, &high));
      CHECK(high && infer_result_status(high) == INFER_OK && infer_result_n_tokens(high) == 4);
    }
    infer_result_destroy(low);
    infer_result_destroy(high);
    free(ref);
    infer_engine_destroy(e);
  }
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    void (*run)(void);
  } cases[] = {
      {"invalid-arguments", case_invalid_arguments}, {"stream-cancel", case_stream_and_cancel},
      {"callback", case_callback},                   {"struct-size", case_struct_size},
      {"threads", case_threads},                     {"unknown-ids", case_unknown_ids},
      {"text", case_text},                           {"info-stats", case_info_stats},
      {"logprobs", case_logprobs},                   {"priority-preemption", case_priority_preemption},
  };
  size_t i;
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL (CASE | all | ids PROMPT)\n", argv[0]);
    return 2;
  }
  g_model = argv[1];
  if (strcmp(argv[2], "ids") == 0) {
    if (argc < 4) return 2;
    return print_greedy_ids(argv[3]);
  }
  for (i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    if (strcmp(argv[2], "all") != 0 && strcmp(argv[2], cases[i].name) != 0) continue;
    cases[i].run();
    if (strcmp(argv[2], "all") != 0) break;
  }
  if (i == sizeof cases / sizeof cases[0] && strcmp(argv[2], "all") != 0) {
    fprintf(stderr, "unknown case %s\n", argv[2]);
    return 2;
  }
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  if (g_checks == 0) fprintf(stderr, "no check ran\n");
  return g_failures || g_checks == 0 ? 1 : 0;
}
