#include <infer.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  if (strcmp(infer_version(), INFER_VERSION_STRING) != 0) {
    fprintf(stderr, "header %s, library %s\n", INFER_VERSION_STRING, infer_version());
    return 1;
  }
  if (strcmp(infer_status_name(INFER_ERR_MALFORMED_FILE), "INFER_ERR_MALFORMED_FILE") != 0) return 1;
  printf("libinfer %s\n", infer_version());
  return 0;
}
