package vegas

import "context"

// GenerateOptions configures Model.Generate; nil means greedy, 128 tokens.
type GenerateOptions struct {
	MaxTokens   int32           // 0 = 128
	Sampling    *Sampling       // nil = greedy
	Session     *SessionOptions // nil = defaults
	IgnoreEOS   bool
	StopStrings []string
	// OnPiece streams the text as it becomes final; returning true stops the
	// generation (Completion.Finish is then FinishCallback).
	OnPiece func(piece string) bool
}

// Completion is the result of Model.Generate.
type Completion struct {
	Text   string
	Tokens []int32
	Info   SequenceInfo
}

// Generate completes prompt (special tokens parsed) in a private session.
// When ctx is done before the end, the sequence is cancelled and Generate
// returns what was made so far together with ctx.Err().
func (m *Model) Generate(ctx context.Context, prompt string, opts *GenerateOptions) (*Completion, error) {
	if opts == nil {
		opts = &GenerateOptions{}
	}
	ids, err := m.Tokenizer().Tokenize(prompt, nil)
	if err != nil {
		return nil, err
	}
	s, err := m.NewSession(opts.Session)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	req := Request{Prompt: ids, Sampling: opts.Sampling, MaxTokens: opts.MaxTokens, IgnoreEOS: opts.IgnoreEOS,
		StopStrings: opts.StopStrings}
	var seq int32
	onPiece := opts.OnPiece
	req.OnToken = func(t Token) bool {
		// A context done here cancels at once (the watcher goroutine of
		// RunContext may not have run yet).
		if ctx.Err() != nil {
			_ = s.Cancel(seq)
			return false // cancelled already
		}
		return onPiece != nil && onPiece(t.Piece)
	}
	seq, err = s.Submit(req)
	if err != nil {
		return nil, err
	}
	runErr := s.RunContext(ctx)
	c := &Completion{}
	if c.Info, err = s.Sequence(seq); err != nil {
		return nil, err
	}
	if c.Tokens, err = s.Tokens(seq); err != nil {
		return nil, err
	}
	if c.Text, err = s.Text(seq); err != nil {
		return nil, err
	}
	if runErr == nil && c.Info.Finish == FinishCancelled && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	if runErr == nil && c.Info.Finish == FinishError {
		runErr = &Error{Op: "vegas_session_run", Status: c.Info.Status, Message: "the sequence failed"}
	}
	return c, runErr
}
