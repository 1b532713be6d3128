package vegas

// #include <vegas.h>
import "C"

import (
	"context"
	"runtime"
	"strings"
	"unsafe"
)

// Backend picks where a model runs.
type Backend int32

// The backends of vegas.h.
const (
	BackendAuto Backend = C.VEGAS_BACKEND_AUTO // CUDA when built and a device is present, else CPU
	BackendCPU  Backend = C.VEGAS_BACKEND_CPU
	BackendCUDA Backend = C.VEGAS_BACKEND_CUDA
)

func (b Backend) String() string {
	switch b {
	case BackendAuto:
		return "auto"
	case BackendCPU:
		return "cpu"
	case BackendCUDA:
		return "cuda"
	}
	return "unknown"
}

// ModelOptions configures LoadModel; the zero value is the library's default.
type ModelOptions struct {
	Backend     Backend
	DeviceIndex int32 // CUDA device
	Threads     int32 // CPU threads, 0 = all cores
	// Progress, if set, gets the load progress in [0, 1]; returning false
	// cancels the load (it then fails with ErrCancelled).
	Progress func(progress float32) bool
}

// Model is a loaded model: weights, config and tokenizer. Safe for concurrent
// use by many goroutines. Close it when done; its sessions keep the weights
// alive until they are closed too.
type Model struct {
	g      *guard
	ptr    *C.vegas_model
	tokPtr *C.vegas_tokenizer // borrowed from the model
}

// ModelInfo describes a loaded model.
type ModelInfo struct {
	Backend         Backend // the backend actually used
	Layers          int
	HiddenSize      int
	Heads           int
	KVHeads         int
	HeadDim         int
	VocabSize       int
	MaxContext      int
	Params          uint64
	WeightBytes     uint64
	KVBytesPerToken uint64
	Architecture    string // e.g. "Qwen3ForCausalLM"
}

// LoadModel loads a Hugging Face model directory (config.json, safetensors,
// tokenizer.json). opts may be nil.
func LoadModel(dir string, opts *ModelOptions) (*Model, error) {
	return LoadModelContext(context.Background(), dir, opts)
}

// LoadModelContext is LoadModel that stops early, with ctx.Err(), when ctx is
// done during the load.
func LoadModelContext(ctx context.Context, dir string, opts *ModelOptions) (*Model, error) {
	if strings.IndexByte(dir, 0) >= 0 {
		return nil, &Error{Op: "vegas_model_load", Status: ErrInvalidArgument, Message: "dir contains a NUL byte"}
	}
	if opts == nil {
		opts = &ModelOptions{}
	}
	var a cArena
	defer a.free()
	// co goes to C by pointer: it lives in C memory (it will hold a handle).
	co := (*C.vegas_model_options)(a.alloc(unsafe.Sizeof(C.vegas_model_options{})))
	C.vegas_model_options_init_sized(co, C.size_t(unsafe.Sizeof(*co)))
	co.backend = C.int32_t(opts.Backend)
	co.device_index = C.int32_t(opts.DeviceIndex)
	co.n_threads = C.int32_t(opts.Threads)
	var sink *progressSink
	if opts.Progress != nil || ctx.Done() != nil {
		user := opts.Progress
		sink = &progressSink{fn: func(p float32) bool {
			if ctx.Err() != nil {
				return false
			}
			return user == nil || user(p)
		}}
	}
	if sink != nil {
		h := newHandle(sink)
		defer deleteHandle(h)
		setProgressCallback(co, h)
	}
	cdir := a.cstring(dir)
	var ptr *C.vegas_model
	err := call("vegas_model_load", func() C.vegas_status { return C.vegas_model_load(cdir, co, &ptr) })
	if sink != nil && sink.panicked != nil {
		panic(sink.panicked)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && errorsIsStatus(err, ErrCancelled) {
			return nil, cerr
		}
		return nil, err
	}
	m := &Model{ptr: ptr}
	m.g = newGuard(func() { C.vegas_model_free(ptr) })
	m.tokPtr = C.vegas_model_tokenizer(ptr)
	runtime.SetFinalizer(m, (*Model).Close)
	return m, nil
}

func errorsIsStatus(err error, s Status) bool {
	e, ok := err.(*Error)
	return ok && e.Status == s
}

// Close releases the model. Sessions made from it keep working; the memory
// goes when the last of them is closed. Closing twice is a no-op.
func (m *Model) Close() error {
	runtime.SetFinalizer(m, nil)
	m.g.close()
	return nil
}

// Tokenizer is the model's tokenizer, usable while the model is open. It refers
// to the model (not the other way round, so no cycle delays the finalizers).
func (m *Model) Tokenizer() *Tokenizer { return &Tokenizer{g: m.g, ptr: m.tokPtr, model: m} }

// Info describes the model.
func (m *Model) Info() (ModelInfo, error) {
	if !m.g.acquire() {
		return ModelInfo{}, ErrClosed
	}
	defer m.g.release()
	var ci C.vegas_model_info
	ci.struct_size = C.uint32_t(unsafe.Sizeof(ci))
	if err := call("vegas_model_get_info", func() C.vegas_status { return C.vegas_model_get_info(m.ptr, &ci) }); err != nil {
		return ModelInfo{}, err
	}
	return ModelInfo{
		Backend:         Backend(ci.backend),
		Layers:          int(ci.n_layers),
		HiddenSize:      int(ci.hidden_size),
		Heads:           int(ci.n_heads),
		KVHeads:         int(ci.n_kv_heads),
		HeadDim:         int(ci.head_dim),
		VocabSize:       int(ci.vocab_size),
		MaxContext:      int(ci.max_context),
		Params:          uint64(ci.n_params),
		WeightBytes:     uint64(ci.weight_bytes),
		KVBytesPerToken: uint64(ci.kv_bytes_per_token),
		Architecture:    C.GoString(&ci.architecture[0]),
	}, nil
}

// MeasureBandwidth measures the copy bandwidth of the memory holding the
// weights, in bytes read + written per second.
func (m *Model) MeasureBandwidth() (float64, error) {
	if !m.g.acquire() {
		return 0, ErrClosed
	}
	defer m.g.release()
	var bps C.double
	err := call("vegas_model_measure_bandwidth", func() C.vegas_status {
		return C.vegas_model_measure_bandwidth(m.ptr, &bps)
	})
	return float64(bps), err
}
