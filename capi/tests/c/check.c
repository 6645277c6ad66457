/* Drives pilot's C ABI for python/tests/test_capi.py:
 *   check ARTIFACT DEVICE OUTDIR STEPS IN0.bin [IN1.bin ...]
 * Input 0 is bound by pointer (the file's bytes, read in place at each step); the others are written into
 * pilot's own input buffers. After STEPS steps each output i is written raw to OUTDIR/i.bin. A failure prints
 * "pilot: error: <message>" and exits with 2 + the status code. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include "pilot.h"

static int fail(PilotStatus st) {
  fprintf(stderr, "pilot: error: %s\n", pilot_last_error());
  return 2 + (int)st;
}

static void *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc(*n ? *n : 1);
  if (fread(p, 1, *n, f) != *n) { free(p); p = NULL; }
  fclose(f);
  return p;
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: check ARTIFACT DEVICE OUTDIR STEPS IN0.bin ...\n"); return 2; }
  PilotModel *m = NULL;
  PilotStatus st = pilot_model_open(argv[1], argv[2], NULL, &m);
  if (st != PILOT_STATUS_OK) return fail(st);
  size_t inputs = pilot_model_input_count(m);
  if ((size_t)(argc - 5) != inputs) { fprintf(stderr, "the model has %zu inputs\n", inputs); return 2; }
  void *bound = NULL;
  for (size_t i = 0; i < inputs; i++) {
    size_t n = 0;
    void *data = read_file(argv[5 + i], &n);
    if (!data) { fprintf(stderr, "cannot read %s\n", argv[5 + i]); return 2; }
    if (i == 0) {
      bool zero_copy = false;
      if ((st = pilot_model_bind_input(m, 0, data, n, &zero_copy)) != PILOT_STATUS_OK) return fail(st);
      printf("input 0 bound, zero-copy %d\n", zero_copy);
      bound = data;
      continue;
    }
    void *buf = NULL;
    size_t size = 0;
    if ((st = pilot_model_input_buffer(m, i, &buf, &size)) != PILOT_STATUS_OK) return fail(st);
    if (size != n) { fprintf(stderr, "%s: %zu bytes, the input has %zu\n", argv[5 + i], n, size); return 2; }
    for (size_t k = 0; k < n; k++) ((unsigned char *)buf)[k] = ((unsigned char *)data)[k];
    free(data);
  }
  int steps = atoi(argv[4]);
  for (int s = 0; s < steps; s++)
    if ((st = pilot_model_step(m)) != PILOT_STATUS_OK) return fail(st);
  for (size_t i = 0; i < pilot_model_output_count(m); i++) {
    const void *data = NULL;
    size_t n = 0;
    if ((st = pilot_model_output(m, i, &data, &n)) != PILOT_STATUS_OK) return fail(st);
    char path[4096];
    snprintf(path, sizeof path, "%s/%zu.bin", argv[3], i);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) { fprintf(stderr, "cannot write %s\n", path); return 2; }
    fclose(f);
  }
  pilot_model_close(m);
  free(bound);
  return 0;
}
