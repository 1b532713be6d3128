package vegas

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Cancelling the context from inside the stream stops the sequence early;
// Generate returns the partial completion and context.Canceled.
func TestGenerateContextCancel(t *testing.T) {
	m := model(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	c, err := m.Generate(ctx, codePrompt, &GenerateOptions{MaxTokens: 200, IgnoreEOS: true, OnPiece: func(string) bool {
		if n++; n == 3 {
			cancel()
		}
		return false
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if c == nil || c.Info.Finish != FinishCancelled || c.Info.Generated < 3 || c.Info.Generated > 6 {
		t.Fatalf("completion %+v", c)
	}
}

// A deadline cancels from the watcher goroutine while Run is inside C.
func TestGenerateDeadline(t *testing.T) {
	m := model(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := m.Generate(ctx, codePrompt, &GenerateOptions{MaxTokens: 4000, IgnoreEOS: true,
		Session: &SessionOptions{KVBytes: 64 << 20, PageSize: 16, MaxBatch: 4, PrefillChunk: 512}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	if c.Info.Finish != FinishCancelled || c.Info.Generated >= 4000 {
		t.Fatalf("info %+v", c.Info)
	}
}

// A context done before the start cancels at once.
func TestGenerateContextAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := model(t).Generate(ctx, codePrompt, &GenerateOptions{MaxTokens: 64})
	if !errors.Is(err, context.Canceled) || c.Info.Finish != FinishCancelled {
		t.Fatalf("err %v, completion %+v", err, c)
	}
	if _, err := LoadModelContext(ctx, modelDir(), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("load with a done context: %v", err)
	}
}

// Session.Cancel of one sequence from another goroutine, and a callback that
// returns false, each stop only their own sequence.
func TestCancelOneSequence(t *testing.T) {
	m := model(t)
	s, err := m.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, _ := m.Tokenizer().Tokenize(codePrompt, nil)
	started := make(chan struct{})
	var once bool
	long, _ := s.Submit(Request{Prompt: ids, MaxTokens: 2000, IgnoreEOS: true, OnToken: func(Token) bool {
		if !once {
			once = true
			close(started)
		}
		return false
	}})
	stopped, _ := s.Submit(Request{Prompt: ids, MaxTokens: 50, IgnoreEOS: true, OnToken: func(tk Token) bool { return true }}) // stops
	short, _ := s.Submit(Request{Prompt: ids, MaxTokens: 5, IgnoreEOS: true})
	go func() {
		<-started
		time.Sleep(50 * time.Millisecond)
		if err := s.Cancel(long); err != nil {
			t.Error(err)
		}
	}()
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	want := map[int32]FinishReason{long: FinishCancelled, stopped: FinishCallback, short: FinishLength}
	for seq, reason := range want {
		info, err := s.Sequence(seq)
		if err != nil || info.Finish != reason {
			t.Fatalf("seq %d: %+v (%v), want %v", seq, info, err, reason)
		}
	}
	if info, _ := s.Sequence(stopped); info.Generated != 1 {
		t.Fatalf("a callback returning false after the first token: %d generated", info.Generated)
	}
}
