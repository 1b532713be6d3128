package vegas

// #cgo LDFLAGS: -lvegas
// #include <vegas.h>
import "C"

import (
	"errors"
	"fmt"
	"runtime"
)

// Status is a vegas_status. The error statuses implement error themselves, so
// errors.Is(err, vegas.ErrCancelled) matches any *Error carrying that status.
type Status int32

// The statuses of vegas.h.
const (
	StatusOK           Status = C.VEGAS_OK
	ErrInvalidArgument Status = C.VEGAS_ERR_INVALID_ARGUMENT
	ErrStructSize      Status = C.VEGAS_ERR_STRUCT_SIZE
	ErrIO              Status = C.VEGAS_ERR_IO
	ErrFormat          Status = C.VEGAS_ERR_FORMAT
	ErrUnsupported     Status = C.VEGAS_ERR_UNSUPPORTED
	ErrOutOfMemory     Status = C.VEGAS_ERR_OUT_OF_MEMORY
	ErrKVFull          Status = C.VEGAS_ERR_KV_FULL
	ErrTokenOutOfRange Status = C.VEGAS_ERR_TOKEN_OUT_OF_RANGE
	ErrBufferTooSmall  Status = C.VEGAS_ERR_BUFFER_TOO_SMALL
	ErrCancelled       Status = C.VEGAS_ERR_CANCELLED
	ErrBackend         Status = C.VEGAS_ERR_BACKEND
	ErrNotBuilt        Status = C.VEGAS_ERR_NOT_BUILT
	ErrNotFound        Status = C.VEGAS_ERR_NOT_FOUND
	ErrWrongState      Status = C.VEGAS_ERR_WRONG_STATE
	ErrInternal        Status = C.VEGAS_ERR_INTERNAL
)

// ErrClosed is returned by a method called on an object after its Close.
var ErrClosed = errors.New("vegas: object is closed")

// String is the library's name of the status, e.g. "VEGAS_ERR_KV_FULL".
func (s Status) String() string { return C.GoString(C.vegas_status_name(C.vegas_status(s))) }

// Error makes a Status usable as a sentinel for errors.Is.
func (s Status) Error() string { return s.String() }

// Error is a failed libvegas call: the status and the library's message.
type Error struct {
	Op      string // the C function, e.g. "vegas_model_load"
	Status  Status
	Message string // vegas_last_error() of the failed call
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Op, e.Status, e.Message)
}

// Unwrap gives the Status, so errors.Is(err, vegas.ErrIO) works.
func (e *Error) Unwrap() error { return e.Status }

// call runs one C call and turns a failure into an *Error. The goroutine stays
// on one OS thread so vegas_last_error (thread-local) belongs to this call.
func call(op string, fn func() C.vegas_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if s := fn(); s != C.VEGAS_OK {
		return &Error{Op: op, Status: Status(s), Message: C.GoString(C.vegas_last_error())}
	}
	return nil
}

// Version is the library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.vegas_version()) }

// VersionNumber is major*10000 + minor*100 + patch of the library.
func VersionNumber() uint32 { return uint32(C.vegas_version_number()) }

// HeaderVersionNumber is the version of the vegas.h this package was built with.
const HeaderVersionNumber = uint32(C.VEGAS_VERSION_NUMBER)
