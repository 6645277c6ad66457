/* pilot's C ABI: open an artifact on a device, bind inputs, step, read outputs. Link libpilot_capi. */

#ifndef PILOT_H
#define PILOT_H

/* Generated from capi/src by cbindgen; do not edit (cargo run -p pilot-regen). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 A status code: what kind of failure, for callers that branch on it. `Ok` is success.
 */
typedef enum PilotStatus {
  PILOT_STATUS_OK = 0,
  /*
   A null pointer, an index or name that does not exist, a size that does not match.
   */
  PILOT_STATUS_INVALID_ARGUMENT = 1,
  /*
   The artifact or the device could not be opened, or the session could not be built.
   */
  PILOT_STATUS_LOAD = 2,
  /*
   A step (copy in, submit, wait, copy out) or a device call failed.
   */
  PILOT_STATUS_STEP = 3,
  /*
   A gate (`ASSERT_MIN_STEP_TIME`) failed.
   */
  PILOT_STATUS_GATE = 4,
  /*
   The artifact's metadata could not be decoded (`output_slices`).
   */
  PILOT_STATUS_METADATA = 5,
  /*
   A call was made in the wrong order (wait without enqueue, enqueue twice).
   */
  PILOT_STATUS_ORDER = 6,
  /*
   A panic inside pilot was caught at the boundary; the model should only be closed.
   */
  PILOT_STATUS_PANIC = 7,
} PilotStatus;

/*
 Element types of inputs and outputs (numpy names: float32, float16, ..., bool).
 */
typedef enum PilotDtype {
  PILOT_DTYPE_F32 = 0,
  PILOT_DTYPE_F16 = 1,
  PILOT_DTYPE_F64 = 2,
  PILOT_DTYPE_I8 = 3,
  PILOT_DTYPE_I16 = 4,
  PILOT_DTYPE_I32 = 5,
  PILOT_DTYPE_I64 = 6,
  PILOT_DTYPE_U8 = 7,
  PILOT_DTYPE_U16 = 8,
  PILOT_DTYPE_U32 = 9,
  PILOT_DTYPE_U64 = 10,
  PILOT_DTYPE_BOOL = 11,
  PILOT_DTYPE_BF16 = 12,
} PilotDtype;

/*
 An open model. Created by [`pilot_model_open`], freed by [`pilot_model_close`]. Not thread-safe: use
 one model from one thread at a time.
 */
typedef struct PilotModel PilotModel;

/*
 How to open a model; a null pointer means all defaults.
 */
typedef struct PilotOptions {
  /*
   CPU worker threads; 0: all cores.
   */
  uint32_t threads;
  /*
   Time each kernel (see [`pilot_model_profile_entry`]).
   */
  bool profile;
  /*
   KGSL context priority 0 (highest) .. 15; negative: the default.
   */
  int32_t priority;
} PilotOptions;

/*
 An input or output: its name, element type, shape and size in bytes.
 */
typedef struct PilotTensorInfo {
  const char *name;
  enum PilotDtype dtype;
  size_t ndim;
  const size_t *shape;
  size_t nbytes;
} PilotTensorInfo;

/*
 Step times so far, in milliseconds.
 */
typedef struct PilotStats {
  uint64_t steps;
  double last_ms;
  double best_ms;
  double last_enqueue_ms;
  double load_ms;
} PilotStats;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 The message of the last failing call on this thread ("" if none). Valid until the next failing call on
 this thread.
 */
const char *pilot_last_error(void);

/*
 pilot's version, e.g. "0.1.0".
 */
const char *pilot_version(void);

/*
 Opens the artifact at `path` on `device` ("cpu", "null", "cl", "qcom", "fake-kgsl"; null: the artifact's
 own backend), as `pilot run` does, and stores the model in `*out`.

 # Safety
 `path` and `device` (when not null) are NUL-terminated; `options` is null or valid; `out` is valid.
 */
enum PilotStatus pilot_model_open(const char *path,
                                  const char *device,
                                  const struct PilotOptions *options,
                                  struct PilotModel **out);

/*
 Frees a model (null is ignored: `PILOT_OK`). Waits for nothing: finish a step in flight first. A model
 already closed is refused (`PILOT_INVALID_ARGUMENT`), not freed twice.

 # Safety
 `m` is null or a model from [`pilot_model_open`].
 */
enum PilotStatus pilot_model_close(struct PilotModel *m);

/*
 The number of inputs (0 for a null or closed model).

 # Safety
 `m` is null or an open model.
 */
size_t pilot_model_input_count(const struct PilotModel *m);

/*
 The number of outputs (0 for a null or closed model).

 # Safety
 `m` is null or an open model.
 */
size_t pilot_model_output_count(const struct PilotModel *m);

/*
 Describes input `index`.

 # Safety
 `m` is an open model; `out` is valid.
 */
enum PilotStatus pilot_model_input_info(struct PilotModel *m,
                                        size_t index,
                                        struct PilotTensorInfo *out);

/*
 Describes output `index`.

 # Safety
 `m` is an open model; `out` is valid.
 */
enum PilotStatus pilot_model_output_info(struct PilotModel *m,
                                         size_t index,
                                         struct PilotTensorInfo *out);

/*
 The index of the input named `name`.

 # Safety
 `m` is an open model; `name` is NUL-terminated; `index` is valid.
 */
enum PilotStatus pilot_model_input_index(struct PilotModel *m, const char *name, size_t *index);

/*
 The index of the output named `name`.

 # Safety
 `m` is an open model; `name` is NUL-terminated; `index` is valid.
 */
enum PilotStatus pilot_model_output_index(struct PilotModel *m, const char *name, size_t *index);

/*
 pilot's own host buffer of input `index` (`*nbytes` bytes): write it, then step. Do not write it while a
 step is in flight. Where the device maps host memory it reads this buffer in place.

 # Safety
 `m` is an open model; `data` and `nbytes` are valid.
 */
enum PilotStatus pilot_model_input_buffer(struct PilotModel *m,
                                          size_t index,
                                          void **data,
                                          size_t *nbytes);

/*
 Copies `nbytes` (exactly the input's size) from `data` into input `index` for the next step.

 # Safety
 `m` is an open model; `data` is valid for `nbytes` bytes.
 */
enum PilotStatus pilot_model_set_input(struct PilotModel *m,
                                       size_t index,
                                       const void *data,
                                       size_t nbytes);

/*
 Binds input `index` to the caller's `nbytes` bytes at `data`: every later step reads them there, in place
 where the device maps host memory (`*zero_copy` true: QCOM) or copied at each enqueue. A null `data`
 binds pilot's own buffer again. `zero_copy` may be null.

 # Safety
 `m` is an open model; `data` stays valid, and unwritten while a step is in flight, until the input is
 rebound or the model is closed.
 */
enum PilotStatus pilot_model_bind_input(struct PilotModel *m,
                                        size_t index,
                                        const void *data,
                                        size_t nbytes,
                                        bool *zero_copy);

/*
 One step: copies the inputs that need it, runs, waits and copies the outputs back. Allocation-free.

 # Safety
 `m` is an open model.
 */
enum PilotStatus pilot_model_step(struct PilotModel *m);

/*
 Asks (`stop` true) every step now running on a device that can stop early ([`pilot_model_stoppable`]) to
 stop: it fails with `PILOT_STATUS_STEP` and "interrupted" soon after, and the model stays usable. The request
 is process-wide and stays until cleared (`stop` false); clear it before the next step. Safe to call from any
 thread and from a signal handler (one atomic store).
 */
void pilot_request_stop(bool stop);

/*
 Whether a step of `m` stops early on [`pilot_request_stop`] (the emulator-backed devices: `amd-emu`, `sim`);
 elsewhere a step runs to its end. False for a null or closed model.

 # Safety
 `m` is null or an open model.
 */
bool pilot_model_stoppable(const struct PilotModel *m);

/*
 The first half of a step: copies the inputs that need it and submits. Allocation-free.

 # Safety
 `m` is an open model.
 */
enum PilotStatus pilot_model_enqueue(struct PilotModel *m);

/*
 The second half: waits for the step in flight and copies its outputs back. Allocation-free.

 # Safety
 `m` is an open model.
 */
enum PilotStatus pilot_model_wait(struct PilotModel *m);

/*
 pilot's own buffer of output `index` (`*nbytes` bytes), rewritten by each finished step.

 # Safety
 `m` is an open model; `data` and `nbytes` are valid.
 */
enum PilotStatus pilot_model_output(struct PilotModel *m,
                                    size_t index,
                                    const void **data,
                                    size_t *nbytes);

/*
 Copies output `index` into `dst`, whose `nbytes` must be exactly the output's size.

 # Safety
 `m` is an open model; `dst` is valid for `nbytes` bytes.
 */
enum PilotStatus pilot_model_get_output(struct PilotModel *m,
                                        size_t index,
                                        void *dst,
                                        size_t nbytes);

/*
 Step times so far and the load time.

 # Safety
 `m` is an open model; `out` is valid.
 */
enum PilotStatus pilot_model_stats(struct PilotModel *m, struct PilotStats *out);

/*
 The `ASSERT_MIN_STEP_TIME` gate: [`PilotStatus::Gate`] unless the fastest step so far took less than
 `limit_ms` (the message is the command's).

 # Safety
 `m` is an open model.
 */
enum PilotStatus pilot_model_check_min_step_time(struct PilotModel *m,
                                                 double limit_ms);

/*
 Device counter `index` (QCOM: ioctls, submits, host_submit_ns, gpu_command_ns, step_dwords):
 [`PilotStatus::InvalidArgument`] past the last one. The name stays valid until close.

 # Safety
 `m` is an open model; `name` and `value` are valid.
 */
enum PilotStatus pilot_model_counter(struct PilotModel *m,
                                     size_t index,
                                     const char **name,
                                     uint64_t *value);

/*
 Kernel `index` of the step's profile (a model opened with `profile`): its name and its time summed over
 all steps, in nanoseconds; [`PilotStatus::InvalidArgument`] past the last op.

 # Safety
 `m` is an open model; `name` and `total_ns` are valid.
 */
enum PilotStatus pilot_model_profile_entry(struct PilotModel *m,
                                           size_t index,
                                           const char **name,
                                           uint64_t *total_ns);

/*
 Slice `index` of openpilot's `output_slices` (from the artifact's outputs or its metadata, decoded without
 unpickling): its name and the elements `start..stop` of the flattened first output;
 [`PilotStatus::InvalidArgument`] past the last one, [`PilotStatus::Metadata`] when the metadata is invalid.

 # Safety
 `m` is an open model; `name`, `start` and `stop` are valid.
 */
enum PilotStatus pilot_model_output_slice(struct PilotModel *m,
                                          size_t index,
                                          const char **name,
                                          size_t *start,
                                          size_t *stop);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* PILOT_H */
