package vegas

import (
	"context"
	"strings"
	"testing"
)

const codePrompt = "def fibonacci(n):\n"

// Greedy generation through the binding gives the C CLI's tokens and text.
func TestGreedyMatchesCLI(t *testing.T) {
	want, wantText := cliGenerate(t, codePrompt, 24)
	c, err := model(t).Generate(context.Background(), codePrompt, &GenerateOptions{MaxTokens: 24, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if !equalIDs(c.Tokens, want) {
		t.Fatalf("tokens %v, the CLI made %v", c.Tokens, want)
	}
	if c.Text != wantText || c.Info.Finish != FinishLength || c.Info.Generated != 24 {
		t.Fatalf("text %q (CLI %q), info %+v", c.Text, wantText, c.Info)
	}
}

// Pieces arrive in token order and add up to the text; two sequences of one
// session each see their own tokens in order.
func TestStreamingOrder(t *testing.T) {
	m := model(t)
	var pieces []string
	c, err := m.Generate(context.Background(), codePrompt, &GenerateOptions{MaxTokens: 16, IgnoreEOS: true,
		OnPiece: func(p string) bool { pieces = append(pieces, p); return false }})
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) != 16 || strings.Join(pieces, "") != c.Text {
		t.Fatalf("%d pieces %q vs text %q", len(pieces), pieces, c.Text)
	}

	s, err := m.NewSession(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok := m.Tokenizer()
	seen := map[int32][]int32{}
	var order []int32
	submit := func(prompt string, max int32) int32 {
		ids, err := tok.Tokenize(prompt, nil)
		if err != nil {
			t.Fatal(err)
		}
		seq, err := s.Submit(Request{Prompt: ids, MaxTokens: max, IgnoreEOS: true, OnToken: func(tk Token) bool {
			seen[tk.Seq] = append(seen[tk.Seq], tk.ID)
			order = append(order, tk.Seq)
			return false
		}})
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	a := submit(codePrompt, 12)
	b := submit("import os\n", 8)
	for {
		n, err := s.Step()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	for _, seq := range []int32{a, b} {
		got, err := s.Tokens(seq)
		if err != nil || !equalIDs(got, seen[seq]) {
			t.Fatalf("seq %d: streamed %v, tokens %v (%v)", seq, seen[seq], got, err)
		}
	}
	// Batched: the sequences' tokens interleave (both were decoded together).
	if len(order) != 20 || order[0] == order[1] {
		t.Fatalf("callback order %v does not interleave the two sequences", order)
	}
	// Sequence a alone gives the same tokens as batched with b.
	if !equalIDs(seen[a][:12], mustGenerate(t, m, codePrompt, 12)) {
		t.Fatalf("batched tokens differ from a lone run")
	}
}

func mustGenerate(t *testing.T, m *Model, prompt string, n int32) []int32 {
	t.Helper()
	c, err := m.Generate(context.Background(), prompt, &GenerateOptions{MaxTokens: n, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	return c.Tokens
}

// Sampling is reproducible per seed and differs between seeds.
func TestSamplingSeed(t *testing.T) {
	m := model(t)
	gen := func(seed uint64) []int32 {
		s := DefaultSampling()
		s.Temperature, s.TopP, s.Seed = 0.9, 0.95, seed
		c, err := m.Generate(context.Background(), "import numpy as np\n", &GenerateOptions{MaxTokens: 16, IgnoreEOS: true, Sampling: &s})
		if err != nil {
			t.Fatal(err)
		}
		return c.Tokens
	}
	if a, b, c := gen(1), gen(1), gen(2); !equalIDs(a, b) || equalIDs(a, c) {
		t.Fatalf("seed 1: %v and %v; seed 2: %v", a, b, c)
	}
}

// Stop strings end the sequence with FinishStop and are left out of the text.
func TestStopString(t *testing.T) {
	m := model(t)
	full := mustGenerate(t, m, codePrompt, 24)
	text, _ := m.Tokenizer().Detokenize(full, false)
	i := strings.IndexAny(text[1:], "(:=") + 1
	if i <= 0 {
		t.Skipf("no stop candidate in %q", text)
	}
	c, err := m.Generate(context.Background(), codePrompt, &GenerateOptions{MaxTokens: 24, IgnoreEOS: true,
		StopStrings: []string{text[i : i+1]}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Finish != FinishStop || c.Text != text[:strings.Index(text, text[i:i+1])] {
		t.Fatalf("stop %q: %q (%v), full %q", text[i:i+1], c.Text, c.Info.Finish, text)
	}
}

// Session options reach the library: a prefill-first schedule and a Vegas
// (speculative) session still give the greedy tokens of the default session.
func TestSessionOptionsKeepGreedyOutput(t *testing.T) {
	m := model(t)
	want := mustGenerate(t, m, codePrompt, 12)
	opts := DefaultSessionOptions()
	opts.Schedule = SchedulePrefillFirst
	opts.Mode = ModeVegas
	c, err := m.Generate(context.Background(), codePrompt, &GenerateOptions{MaxTokens: 12, IgnoreEOS: true, Session: &opts})
	if err != nil {
		t.Fatal(err)
	}
	if !equalIDs(c.Tokens, want) || c.Info.Rounds == 0 {
		t.Fatalf("vegas + prefill-first: %v (%d rounds), default: %v", c.Tokens, c.Info.Rounds, want)
	}
}
