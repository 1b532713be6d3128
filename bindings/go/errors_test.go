package vegas

import (
	"errors"
	"strings"
	"testing"
)

// Library failures come back as *Error with the status and the library's message.
func TestErrorsCarryStatusAndMessage(t *testing.T) {
	_, err := LoadModel("/nonexistent/model-dir", nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != ErrIO || !errors.Is(err, ErrIO) {
		t.Fatalf("load of a missing dir: %#v", err)
	}
	if !strings.Contains(e.Message, "/nonexistent/model-dir") || !strings.Contains(err.Error(), "VEGAS_ERR_IO") {
		t.Fatalf("message %q / %q", e.Message, err)
	}

	tok := model(t).Tokenizer()
	_, err = tok.Detokenize([]int32{1 << 30}, false)
	if !errors.Is(err, ErrTokenOutOfRange) || !errors.As(err, &e) || e.Message == "" {
		t.Fatalf("out-of-range id: %v", err)
	}
	if _, err := tok.TokenID("<|no such token|>"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown token name: %v", err)
	}

	s, err := model(t).NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Submit(Request{}); !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || e.Message == "" {
		t.Fatalf("empty prompt: %v", err)
	}
	if _, err := s.Submit(Request{Prompt: []int32{1}, StopStrings: []string{"a\x00b"}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NUL in a stop string: %v", err)
	}
	if _, err := s.Sequence(12345); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown sequence: %v", err)
	}
	bad := DefaultSessionOptions()
	bad.Policy = "no-such-policy"
	bad.Mode = ModeVegas
	if _, err := model(t).NewSession(&bad); !errors.As(err, &e) || !strings.Contains(e.Message, "no-such-policy") {
		t.Fatalf("unknown policy: %v", err)
	}
	// Inside a token callback the session cannot be stepped: WRONG_STATE.
	var inner error
	ids, _ := tok.Tokenize(codePrompt, nil)
	if _, err := s.Submit(Request{Prompt: ids, MaxTokens: 2, OnToken: func(Token) bool { _, inner = s.Step(); return false }}); err != nil {
		t.Fatal(err)
	}
	if err := s.Run(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inner, ErrWrongState) {
		t.Fatalf("Step inside a callback: %v", inner)
	}
}

// A panic in a token callback stops the sequence and is re-raised on the
// goroutine that drove the session, which stays usable.
func TestCallbackPanicIsReraised(t *testing.T) {
	s, err := model(t).NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids, _ := model(t).Tokenizer().Tokenize(codePrompt, nil)
	seq, _ := s.Submit(Request{Prompt: ids, MaxTokens: 8, OnToken: func(Token) bool { panic("boom") }})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = s.Run()
		t.Fatal("Run did not re-panic")
	}()
	if info, err := s.Sequence(seq); err != nil || info.Finish != FinishCallback {
		t.Fatalf("%+v, %v", info, err)
	}
}
