/* Steps one pilot artifact at 20 Hz from C, as modeld does, and prints each step's time.
 *   cc examples/run_model.c -Icapi/include target/release/libpilot_capi.a -lpthread -ldl -lm -lrt -lutil -o run_model
 *   ./run_model policy.pkl [STEPS] [DEVICE]          (ASSERT_MIN_STEP_TIME=ms gates the fastest step) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "pilot.h"

static double now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }

int main(int argc, char **argv) {
  PilotModel *m = NULL;
  if (argc < 2 || pilot_model_open(argv[1], argc > 3 ? argv[3] : NULL, NULL, &m) != PILOT_STATUS_OK) {
    fprintf(stderr, "pilot: error: %s\n", argc < 2 ? "usage: run_model ARTIFACT [STEPS] [DEVICE]" : pilot_last_error());
    return 2;
  }
  for (size_t i = 0; i < pilot_model_input_count(m); i++) {  /* a real caller writes camera frames here */
    void *buf; size_t n;
    if (pilot_model_input_buffer(m, i, &buf, &n) == PILOT_STATUS_OK) memset(buf, 0, n);
  }
  int steps = argc > 2 ? atoi(argv[2]) : 20;
  for (int s = 0; s < steps; s++) {
    double start = now_ms();
    if (pilot_model_step(m) != PILOT_STATUS_OK) { fprintf(stderr, "pilot: error: %s\n", pilot_last_error()); return 2; }
    const void *out; size_t n;
    pilot_model_output(m, 0, &out, &n);
    double ms = now_ms() - start;
    printf("step %2d: %7.3f ms (output 0: %zu bytes, first float %g)\n", s, ms, n, (double)((const float *)out)[0]);
    struct timespec rest = {0, (long)((50.0 - ms > 0 ? 50.0 - ms : 0) * 1e6)};  /* 20 Hz */
    nanosleep(&rest, NULL);
  }
  const char *gate = getenv("ASSERT_MIN_STEP_TIME");
  int rc = gate && pilot_model_check_min_step_time(m, atof(gate)) != PILOT_STATUS_OK ? 1 : 0;
  if (rc) fprintf(stderr, "%s\n", pilot_last_error());
  pilot_model_close(m);
  return rc;
}
