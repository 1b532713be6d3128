package vegas

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// Closing in any order: a session outlives its model; a closed object reports
// ErrClosed; closing twice is fine.
func TestCloseInAnyOrder(t *testing.T) {
	for _, order := range []string{"model-first", "session-first", "detok-first", "tokenizer-user-last"} {
		t.Run(order, func(t *testing.T) {
			m, err := LoadModel(modelDir(), &ModelOptions{Backend: BackendCPU})
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.NewSession(nil)
			if err != nil {
				t.Fatal(err)
			}
			tok := m.Tokenizer()
			d, err := tok.NewDetokenizer(false)
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := tok.Tokenize(codePrompt, nil)
			switch order {
			case "model-first":
				m.Close()
				// The session still generates: it holds the weights.
				seq, err := s.Submit(Request{Prompt: ids, MaxTokens: 4})
				if err != nil || s.Run() != nil {
					t.Fatalf("session after model close: %v", err)
				}
				if got, _ := s.Tokens(seq); len(got) != 4 {
					t.Fatalf("%d tokens", len(got))
				}
				// The detokenizer keeps the tokenizer open until it is closed.
				if _, err := d.Push(ids[0]); err != nil {
					t.Fatal(err)
				}
				if _, err := m.NewSession(nil); !errors.Is(err, ErrClosed) {
					t.Fatalf("NewSession on a closed model: %v", err)
				}
				s.Close()
				d.Close()
			case "session-first":
				s.Close()
				d.Close()
				m.Close()
			case "detok-first":
				d.Close()
				m.Close()
				s.Close()
			case "tokenizer-user-last":
				s.Close()
				m.Close()
				// The model's tokenizer closes with the model; the detokenizer
				// keeps the C tokenizer alive for itself.
				if _, err := tok.Tokenize("x", nil); !errors.Is(err, ErrClosed) {
					t.Fatalf("tokenizer after the model went: %v", err)
				}
				if s, err := d.Push(ids[0]); err != nil || s == "" {
					t.Fatalf("detokenizer after the model went: %q, %v", s, err)
				}
				d.Close()
			}
			if _, err := s.Submit(Request{Prompt: ids}); !errors.Is(err, ErrClosed) {
				t.Fatalf("Submit on a closed session: %v", err)
			}
			if _, err := d.Push(1); !errors.Is(err, ErrClosed) {
				t.Fatalf("Push on a closed detokenizer: %v", err)
			}
			if _, err := m.Info(); !errors.Is(err, ErrClosed) {
				t.Fatalf("Info on a closed model: %v", err)
			}
			m.Close()
			s.Close()
			d.Close()
		})
	}
}

// Objects dropped without Close are freed by their finalizers, in whatever
// order the GC picks (TestMain checks that nothing is left).
func TestDroppedObjectsAreFinalized(t *testing.T) {
	before, handles := liveObjects.Load(), liveHandles.Load()
	func() {
		m, err := LoadModel(modelDir(), &ModelOptions{Backend: BackendCPU})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := m.NewSession(nil)
		ids, _ := m.Tokenizer().Tokenize(codePrompt, nil)
		_, _ = s.Submit(Request{Prompt: ids, MaxTokens: 2, OnToken: func(Token) bool { return false }})
		_ = s.Run()
		d, _ := m.Tokenizer().NewDetokenizer(true)
		_, _ = d.Push(ids[0])
		tok, _ := LoadTokenizer(modelDir())
		_ = tok.VocabSize()
	}()
	if liveObjects.Load() != before+4 || liveHandles.Load() != handles+1 {
		t.Fatalf("%d live objects, %d handles; want %d, %d", liveObjects.Load(), liveHandles.Load(), before+4, handles+1)
	}
	if err := waitLive(before, handles); err != nil {
		t.Fatal(err)
	}
}

// Close from another goroutine (and from inside a callback) while the session
// is running: the run stops, nothing is freed under it, nothing leaks.
func TestCloseWhileRunning(t *testing.T) {
	m := model(t)
	ids, _ := m.Tokenizer().Tokenize(codePrompt, nil)

	s, _ := m.NewSession(nil)
	seq, _ := s.Submit(Request{Prompt: ids, MaxTokens: 50, IgnoreEOS: true, OnToken: func(tk Token) bool {
		if got, err := s.Tokens(tk.Seq); err != nil || len(got) == 0 {
			t.Errorf("Tokens inside the callback: %v, %v", got, err)
		}
		s.Close() // the free waits for the run in flight
		return true
	}})
	if err := s.Run(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := s.Sequence(seq); !errors.Is(err, ErrClosed) {
		t.Fatalf("session after close in callback: %v", err)
	}

	s2, _ := m.NewSession(nil)
	_, _ = s2.Submit(Request{Prompt: ids, MaxTokens: 3000, IgnoreEOS: true})
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		close(started)
		done <- s2.Run()
	}()
	<-started
	s2.Close()
	if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatalf("run under a concurrent close: %v", err)
	}
}

// Many goroutines tokenize on one model while it is closed under them.
func TestConcurrentUseAndClose(t *testing.T) {
	m, err := LoadModel(modelDir(), &ModelOptions{Backend: BackendCPU})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := m.Tokenizer()
			for j := 0; j < 200; j++ {
				ids, err := tok.Tokenize(codeText, nil)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil || len(ids) == 0 {
					t.Errorf("tokenize: %v", err)
					return
				}
			}
		}()
	}
	m.Close()
	wg.Wait()
	if _, err := m.Generate(context.Background(), "x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("generate on a closed model: %v", err)
	}
}
