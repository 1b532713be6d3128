// Package vegas is the Go binding of libvegas, an LLM inference runtime with a C
// ABI (include/vegas.h).
//
// Objects own C memory: call Close when done with a Model, Session, Tokenizer or
// Detokenizer. A finalizer frees what was forgotten, as a safety net only. Close
// may be called in any order and from any goroutine: a Session keeps its model's
// weights alive, and an object closed while another goroutine is still inside
// one of its calls is freed when that call returns.
//
// Errors from the library are *Error values carrying the Status and the
// library's message; errors.Is(err, vegas.ErrKVFull) tests the status.
//
// Building: cgo needs the header and the library, e.g.
//
//	CGO_CFLAGS="-I/path/to/libvegas/include" CGO_LDFLAGS="-L/path/to/lib -lvegas" go build
//
// or, for an installed library, CGO_CFLAGS="$(pkg-config --cflags vegas)" and
// CGO_LDFLAGS="$(pkg-config --libs vegas)".
//
// Threads: a Model and a Tokenizer may be used from any number of goroutines at
// once. A Session is driven by one goroutine at a time; only Cancel and Close
// may be called from another goroutine while it runs.
package vegas
