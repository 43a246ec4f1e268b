/* simple-c: streams a completion through the C API (capi/include/infer.h).
 *   simple-c MODEL.gguf "PROMPT" */
#include <infer.h>
#include <stdio.h>

/* Runs on the engine's worker for each token, then once with finished set. */
static int print_token(const infer_token_event *event, void *user_data) {
  (void)user_data;
  fwrite(event->text, 1, event->text_len, stdout);
  fflush(stdout);
  return 0; /* nonzero would cancel the request */
}

int main(int argc, char **argv) {
  infer_engine_params ep;
  infer_request_params rp;
  infer_request_metrics m;
  infer_engine *engine;
  infer_result *result;
  int rc = 0;
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
    return 2;
  }
  infer_engine_params_init(&ep);
  ep.model_path = argv[1];
  if (infer_engine_create(&ep, &engine) != INFER_OK) {
    fprintf(stderr, "simple-c: %s\n", infer_last_error());
    return 1;
  }
  infer_request_params_init(&rp);
  rp.prompt = argv[2];
  rp.max_tokens = 64;
  rp.on_token = print_token;
  if (infer_engine_generate(engine, &rp, &result) != INFER_OK) {
    fprintf(stderr, "simple-c: %s\n", infer_engine_error(engine));
    infer_engine_destroy(engine);
    return 1;
  }
  m.struct_size = sizeof m;
  if (infer_result_status(result) != INFER_OK) {
    fprintf(stderr, "\nsimple-c: %s\n", infer_result_error(result));
    rc = 1;
  } else if (infer_result_metrics(result, &m) == INFER_OK) {
    printf("\n[%s] %lld tokens, TTFT %.1f ms, %.1f tokens/s\n", infer_finish_reason_name(infer_result_finish_reason(result)),
           (long long)m.generated_tokens, m.ttft_ms, m.tpot_ms > 0 ? 1000.0 / m.tpot_ms : 0.0);
  }
  infer_result_destroy(result);
  infer_engine_destroy(engine);
  return rc;
}
