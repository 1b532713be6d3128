package vegas

// #include <vegas.h>
import "C"

import (
	"context"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"unsafe"
)

// CancelAll, passed to Session.Cancel, cancels every sequence.
const CancelAll int32 = -1

// FinishReason is why a sequence ended.
type FinishReason int32

// The finish reasons of vegas.h.
const (
	FinishNone      FinishReason = C.VEGAS_FINISH_NONE // still running
	FinishEOS       FinishReason = C.VEGAS_FINISH_EOS
	FinishLength    FinishReason = C.VEGAS_FINISH_LENGTH
	FinishStop      FinishReason = C.VEGAS_FINISH_STOP
	FinishCallback  FinishReason = C.VEGAS_FINISH_CALLBACK
	FinishCancelled FinishReason = C.VEGAS_FINISH_CANCELLED
	FinishError     FinishReason = C.VEGAS_FINISH_ERROR
)

func (f FinishReason) String() string {
	names := [...]string{"none", "eos", "length", "stop", "callback", "cancelled", "error"}
	if f >= 0 && int(f) < len(names) {
		return names[f]
	}
	return "unknown"
}

// SequenceInfo is the state of one sequence.
type SequenceInfo struct {
	Finish         FinishReason
	Status         Status // of a sequence that finished with FinishError
	Prompt         int
	Generated      int
	Rounds         int64 // speculative statistics, zero in ModeVanilla
	Drafted        int64
	Accepted       int64
	TokensPerRound float64
	PrefillSeconds float64
	DecodeSeconds  float64
}

// SessionStats are a session's speculative statistics since it was created.
type SessionStats struct {
	Gamma          int
	Rounds         int64
	Drafted        int64
	Accepted       int64
	Committed      int64
	TokensPerRound float64
	DraftSeconds   float64
	VerifySeconds  float64
	SelectSeconds  float64
	DraftedAt      []int64 // rounds that drafted position i, i < Gamma
	AcceptedAt     []int64 // rounds whose draft i was accepted
}

// Session decodes sequences together on one KV pool. One goroutine drives it
// at a time (Submit, Step, Run, queries); Cancel and Close may come from any
// goroutine. It keeps its model's weights alive until closed.
type Session struct {
	g     *guard
	ptr   *C.vegas_session
	sinks *sinkTable
}

// sinkTable holds the handles of a session's token callbacks. It is apart from
// Session so the guard's free function need not refer to the Session (a cycle
// through a finalized object would keep the finalizer from ever running).
type sinkTable struct {
	mu      sync.Mutex
	handles map[int32]cgo.Handle
}

// NewSession makes a session on the model. opts may be nil (the defaults).
func (m *Model) NewSession(opts *SessionOptions) (*Session, error) {
	if !m.g.acquire() {
		return nil, ErrClosed
	}
	defer m.g.release()
	var a cArena
	defer a.free()
	co, err := opts.toC(&a)
	if err != nil {
		return nil, err
	}
	var ptr *C.vegas_session
	if err := call("vegas_session_create", func() C.vegas_status { return C.vegas_session_create(m.ptr, co, &ptr) }); err != nil {
		return nil, err
	}
	sinks := &sinkTable{handles: map[int32]cgo.Handle{}}
	s := &Session{ptr: ptr, sinks: sinks}
	s.g = newGuard(func() {
		C.vegas_session_free(ptr)
		sinks.mu.Lock()
		for _, h := range sinks.handles {
			deleteHandle(h)
		}
		sinks.handles = nil
		sinks.mu.Unlock()
	})
	runtime.SetFinalizer(s, (*Session).Close)
	return s, nil
}

// Close frees the session. Called while another goroutine (or a token callback
// up the stack) is inside Step or Run, it cancels every sequence and the
// memory goes when that call returns. Closing twice is a no-op.
func (s *Session) Close() error {
	runtime.SetFinalizer(s, nil)
	// A call in flight: stop its sequences so it returns soon (harmless if it
	// has just returned).
	if s.g.busy() && s.g.acquire() {
		C.vegas_session_cancel(s.ptr, C.int32_t(CancelAll))
		s.g.release()
	}
	s.g.close()
	return nil
}

// use runs fn with the session pinned open.
func (s *Session) use(fn func() error) error {
	if !s.g.acquire() {
		return ErrClosed
	}
	defer s.g.release()
	return fn()
}

// Submit adds a sequence; it starts at the next Step. Returns its id.
func (s *Session) Submit(r Request) (int32, error) {
	var a cArena
	defer a.free()
	cr, err := r.toC(&a)
	if err != nil {
		return -1, err
	}
	var h cgo.Handle
	if r.OnToken != nil {
		h = newHandle(&tokenSink{fn: r.OnToken})
		setTokenCallback(cr, h)
	}
	var seq C.int32_t = -1
	err = s.use(func() error {
		return call("vegas_session_submit", func() C.vegas_status { return C.vegas_session_submit(s.ptr, cr, &seq) })
	})
	if h != 0 {
		if err != nil {
			deleteHandle(h)
		} else {
			s.sinks.mu.Lock()
			s.sinks.handles[int32(seq)] = h
			s.sinks.mu.Unlock()
		}
	}
	return int32(seq), err
}

// Step runs one decoding round for every active sequence and returns how many
// are still active.
func (s *Session) Step() (int, error) {
	var n C.int32_t
	err := s.use(func() error {
		return call("vegas_session_step", func() C.vegas_status { return C.vegas_session_step(s.ptr, &n) })
	})
	s.repanic()
	return int(n), err
}

// Run steps until no sequence is active.
func (s *Session) Run() error {
	err := s.use(func() error {
		return call("vegas_session_run", func() C.vegas_status { return C.vegas_session_run(s.ptr) })
	})
	s.repanic()
	return err
}

// RunContext is Run that cancels every sequence when ctx is done. It returns
// ctx.Err() when that cancelled the work; the sequences keep what they made.
func (s *Session) RunContext(ctx context.Context) error {
	if ctx.Done() == nil {
		return s.Run()
	}
	var cancelled atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			cancelled.Store(true)
			_ = s.Cancel(CancelAll)
		case <-stop:
		}
	}()
	err := s.Run()
	close(stop)
	wg.Wait() // the watcher may not outlive the call (Close must not race with its Cancel)
	if err == nil && cancelled.Load() {
		return ctx.Err()
	}
	return err
}

// repanic re-raises, on the driving goroutine, a panic of a token callback.
func (s *Session) repanic() {
	s.sinks.mu.Lock()
	var p any
	for _, h := range s.sinks.handles {
		if sink := h.Value().(*tokenSink); sink.panicked != nil && p == nil {
			p = sink.panicked
			sink.panicked = nil
		}
	}
	s.sinks.mu.Unlock()
	if p != nil {
		panic(p)
	}
}

// Cancel asks sequence seq (or CancelAll) to stop at the next round boundary.
// Safe from any goroutine, also while another one is inside Step or Run.
func (s *Session) Cancel(seq int32) error {
	return s.use(func() error {
		return call("vegas_session_cancel", func() C.vegas_status { return C.vegas_session_cancel(s.ptr, C.int32_t(seq)) })
	})
}

// Sequence gives the state of a sequence.
func (s *Session) Sequence(seq int32) (SequenceInfo, error) {
	var ci C.vegas_sequence_info
	ci.struct_size = C.uint32_t(unsafe.Sizeof(ci))
	err := s.use(func() error {
		return call("vegas_sequence_get_info", func() C.vegas_status {
			return C.vegas_sequence_get_info(s.ptr, C.int32_t(seq), &ci)
		})
	})
	if err != nil {
		return SequenceInfo{}, err
	}
	return SequenceInfo{
		Finish: FinishReason(ci.finish_reason), Status: Status(ci.status), Prompt: int(ci.n_prompt),
		Generated: int(ci.n_generated), Rounds: int64(ci.rounds), Drafted: int64(ci.drafted),
		Accepted: int64(ci.accepted), TokensPerRound: float64(ci.tokens_per_round),
		PrefillSeconds: float64(ci.prefill_seconds), DecodeSeconds: float64(ci.decode_seconds),
	}, nil
}

// Tokens gives the generated token ids of a sequence (stop tokens excluded).
func (s *Session) Tokens(seq int32) ([]int32, error) {
	var out []int32
	err := s.use(func() error {
		ids := make([]int32, 64)
		for {
			var n C.size_t
			err := call("vegas_sequence_tokens", func() C.vegas_status {
				return C.vegas_sequence_tokens(s.ptr, C.int32_t(seq), (*C.int32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)), &n)
			})
			if err == nil {
				out = ids[:n]
				return nil
			}
			if !errorsIsStatus(err, ErrBufferTooSmall) || int(n) < len(ids) {
				return err
			}
			ids = make([]int32, int(n)+1)
		}
	})
	return out, err
}

// Text gives the generated text of a sequence (stop string excluded).
func (s *Session) Text(seq int32) (string, error) {
	var out string
	err := s.use(func() error {
		b, err := fillBytes("vegas_sequence_text", 256, func(buf *C.char, capacity C.size_t, n *C.size_t) C.vegas_status {
			return C.vegas_sequence_text(s.ptr, C.int32_t(seq), buf, capacity, n)
		})
		out = string(b)
		return err
	})
	return out, err
}

// Release forgets a sequence (a running one is cancelled) and frees its KV.
func (s *Session) Release(seq int32) error {
	err := s.use(func() error {
		return call("vegas_sequence_release", func() C.vegas_status { return C.vegas_sequence_release(s.ptr, C.int32_t(seq)) })
	})
	if err == nil {
		s.sinks.mu.Lock()
		if h, ok := s.sinks.handles[seq]; ok {
			deleteHandle(h)
			delete(s.sinks.handles, seq)
		}
		s.sinks.mu.Unlock()
	}
	return err
}

// Stats gives the session's speculative statistics.
func (s *Session) Stats() (SessionStats, error) {
	var cs C.vegas_session_stats
	cs.struct_size = C.uint32_t(unsafe.Sizeof(cs))
	err := s.use(func() error {
		return call("vegas_session_get_stats", func() C.vegas_status { return C.vegas_session_get_stats(s.ptr, &cs) })
	})
	if err != nil {
		return SessionStats{}, err
	}
	st := SessionStats{
		Gamma: int(cs.gamma), Rounds: int64(cs.rounds), Drafted: int64(cs.drafted), Accepted: int64(cs.accepted),
		Committed: int64(cs.committed), TokensPerRound: float64(cs.tokens_per_round),
		DraftSeconds: float64(cs.draft_seconds), VerifySeconds: float64(cs.verify_seconds),
		SelectSeconds: float64(cs.select_seconds),
	}
	n := st.Gamma
	if n < 0 || n > C.VEGAS_MAX_GAMMA {
		n = C.VEGAS_MAX_GAMMA
	}
	for i := 0; i < n; i++ {
		st.DraftedAt = append(st.DraftedAt, int64(cs.drafted_at[i]))
		st.AcceptedAt = append(st.AcceptedAt, int64(cs.accepted_at[i]))
	}
	return st, nil
}
