package vegas

// The Go side of the C callbacks. C gets a cgo.Handle as user_data (Go
// pointers may not be kept by C); the trampolines in bridge.go forward to these.

// #include <stddef.h>
// #include <stdint.h>
import "C"

import (
	"runtime/cgo"
	"sync/atomic"
)

// liveHandles counts cgo.Handles given to C and not deleted yet (leak tests).
var liveHandles atomic.Int64

func newHandle(v any) cgo.Handle {
	liveHandles.Add(1)
	return cgo.NewHandle(v)
}

func deleteHandle(h cgo.Handle) {
	h.Delete()
	liveHandles.Add(-1)
}

// Token is one committed token of a sequence, as a token callback sees it.
type Token struct {
	Seq   int32  // the sequence, as Submit returned it
	ID    int32  // the token id
	Piece string // the text that became final with this token (may be empty)
}

// tokenSink holds a request's callback. It must not refer to its Session: the
// handle table is a GC root, and the session could never be finalized.
type tokenSink struct {
	fn       func(Token) bool
	panicked any // a panic of fn, re-raised on the goroutine that drove the session
}

// progressSink holds a model load's progress callback.
type progressSink struct {
	fn       func(float32) bool
	panicked any
}

//export goVegasOnToken
func goVegasOnToken(seq C.int32_t, token C.int32_t, piece *C.char, n C.size_t, h C.uintptr_t) (stop C.int32_t) {
	sink := cgo.Handle(h).Value().(*tokenSink)
	if sink.panicked != nil {
		return 1
	}
	defer func() {
		if r := recover(); r != nil {
			sink.panicked = r
			stop = 1
		}
	}()
	t := Token{Seq: int32(seq), ID: int32(token), Piece: C.GoStringN(piece, C.int(n))}
	if sink.fn(t) {
		return 1
	}
	return 0
}

//export goVegasOnProgress
func goVegasOnProgress(progress C.float, h C.uintptr_t) (stop C.int32_t) {
	sink := cgo.Handle(h).Value().(*progressSink)
	defer func() {
		if r := recover(); r != nil {
			sink.panicked = r
			stop = 1
		}
	}()
	if sink.fn(float32(progress)) {
		return 0
	}
	return 1
}
