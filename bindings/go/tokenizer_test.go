package vegas

import (
	"strings"
	"testing"
)

const codeText = "def f(x):\n    return x  # é 你好<|endoftext|>"

func TestModelInfo(t *testing.T) {
	m := model(t)
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Backend != BackendCPU || info.Layers <= 0 || info.Architecture == "" || info.KVBytesPerToken == 0 {
		t.Fatalf("implausible info %+v", info)
	}
	if got := m.Tokenizer().VocabSize(); got < info.VocabSize-1024 || got <= 0 {
		t.Fatalf("tokenizer vocab %d vs model vocab %d", got, info.VocabSize)
	}
	if VersionNumber() != HeaderVersionNumber || Version() == "" {
		t.Fatalf("library %s (%d) vs header %d", Version(), VersionNumber(), HeaderVersionNumber)
	}
}

func TestTokenizeMatchesCLIAndRoundTrips(t *testing.T) {
	tok := model(t).Tokenizer()
	ids, err := tok.Tokenize(codeText, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := cliTokenize(t, codeText); !equalIDs(ids, want) {
		t.Fatalf("ids %v, the CLI says %v", ids, want)
	}
	text, err := tok.Detokenize(ids, false)
	if err != nil {
		t.Fatal(err)
	}
	if text != codeText {
		t.Fatalf("round trip %q != %q", text, codeText)
	}
	// Without special parsing the marker is plain text: more ids, none special.
	plain, err := tok.Tokenize(codeText, &TokenizeOptions{NoParseSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range plain {
		if tok.IsSpecial(id) {
			t.Fatalf("special id %d with NoParseSpecial", id)
		}
	}
	if !tok.IsSpecial(ids[len(ids)-1]) {
		t.Fatalf("last id %d should be <|endoftext|>", ids[len(ids)-1])
	}
	skipped, err := tok.Detokenize(ids, true)
	if err != nil || skipped != strings.TrimSuffix(codeText, "<|endoftext|>") {
		t.Fatalf("skip special: %q, %v", skipped, err)
	}
	empty, err := tok.Tokenize("", nil)
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty text: %v, %v", empty, err)
	}
}

func TestTokenQueries(t *testing.T) {
	tok := model(t).Tokenizer()
	eos, err := tok.TokenID("<|endoftext|>")
	if err != nil {
		t.Fatal(err)
	}
	st, err := tok.SpecialTokens()
	if err != nil || st.EOS != eos {
		t.Fatalf("special tokens %+v (eos by name %d): %v", st, eos, err)
	}
	piece, err := tok.TokenPiece(eos)
	if err != nil || string(piece) != "<|endoftext|>" {
		t.Fatalf("piece %q: %v", piece, err)
	}
}

// The streaming detokenizer gives only complete UTF-8, and in total the text.
func TestDetokenizerStreamsWholeCharacters(t *testing.T) {
	tok := model(t).Tokenizer()
	const text = "x = '你好 é ✓'\n"
	ids, err := tok.Tokenize(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tok.NewDetokenizer(false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var b strings.Builder
	for _, id := range ids {
		s, err := d.Push(id)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(s, '\uFFFD') {
			t.Fatalf("piece %q holds a broken character", s)
		}
		b.WriteString(s)
	}
	rest, err := d.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if b.String()+rest != text {
		t.Fatalf("streamed %q + %q != %q", b.String(), rest, text)
	}
}

// A tokenizer loaded alone agrees with the model's.
func TestLoadTokenizer(t *testing.T) {
	tok, err := LoadTokenizer(modelDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	a, err := tok.Tokenize(codeText, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := model(t).Tokenizer().Tokenize(codeText, nil)
	if !equalIDs(a, b) {
		t.Fatalf("%v != %v", a, b)
	}
}
