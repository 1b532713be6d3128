package vegas

import (
	"sync"
	"sync/atomic"
)

// liveObjects counts C objects this package owns and has not freed yet; the
// tests read it to prove that Close and the finalizers free everything.
var liveObjects atomic.Int64

// guard owns one C object. Every call on the object runs between acquire and
// release; close marks it closed and frees it at once, or, when a call is still
// running on another goroutine (or up the stack, inside a callback), when the
// last such call releases it. So Close never races with a call in flight.
type guard struct {
	mu     sync.Mutex
	users  int
	closed bool
	free   func() // frees the C object; nil once it ran
}

func newGuard(free func()) *guard {
	liveObjects.Add(1)
	return &guard{free: free}
}

// acquire reports false (the caller returns ErrClosed) once the object is closed.
func (g *guard) acquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.users++
	return true
}

func (g *guard) release() {
	g.mu.Lock()
	g.users--
	f := g.takeFreeLocked()
	g.mu.Unlock()
	runFree(f)
}

// close reports whether this was the first close.
func (g *guard) close() bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.closed = true
	f := g.takeFreeLocked()
	g.mu.Unlock()
	runFree(f)
	return true
}

// busy reports whether a call is in flight (the object is not freed yet).
func (g *guard) busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.users > 0
}

func (g *guard) takeFreeLocked() func() {
	if !g.closed || g.users > 0 || g.free == nil {
		return nil
	}
	f := g.free
	g.free = nil
	return f
}

func runFree(f func()) {
	if f != nil {
		f()
		liveObjects.Add(-1)
	}
}
