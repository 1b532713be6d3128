package vegas

// C trampolines with the exact vegas.h callback types: they cast the Go
// exports' parameters (cgo drops const) and carry the handle as user_data.

/*
#include <vegas.h>

extern int32_t goVegasOnToken(int32_t, int32_t, char *, size_t, uintptr_t);
extern int32_t goVegasOnProgress(float, uintptr_t);

static int32_t vg_on_token(int32_t seq, int32_t token, const char *piece, size_t n, void *user) {
  return goVegasOnToken(seq, token, (char *)piece, n, (uintptr_t)user);
}

static int32_t vg_on_progress(float progress, void *user) {
  return goVegasOnProgress(progress, (uintptr_t)user);
}

static void vg_request_set_callback(vegas_request *r, uintptr_t handle) {
  r->on_token = vg_on_token;
  r->user_data = (void *)handle;
}

static void vg_model_options_set_progress(vegas_model_options *o, uintptr_t handle) {
  o->progress = vg_on_progress;
  o->progress_user_data = (void *)handle;
}
*/
import "C"

import "runtime/cgo"

func setTokenCallback(r *C.vegas_request, h cgo.Handle) {
	C.vg_request_set_callback(r, C.uintptr_t(h))
}

func setProgressCallback(o *C.vegas_model_options, h cgo.Handle) {
	C.vg_model_options_set_progress(o, C.uintptr_t(h))
}
