package vegas

// #include <stdlib.h>
// #include <vegas.h>
import "C"

import (
	"runtime"
	"strings"
	"unsafe"
)

// Tokenizer is a byte-level BPE tokenizer: a model's (Model.Tokenizer) or one
// loaded alone (LoadTokenizer). Safe for concurrent use.
type Tokenizer struct {
	g     *guard // the model's guard for a model's tokenizer
	ptr   *C.vegas_tokenizer
	model *Model // set for a model's tokenizer: keeps the model reachable
}

// TokenizeOptions changes how Tokenize treats special tokens; the zero value is
// the library's default (parse them, add bos when the tokenizer asks for it).
type TokenizeOptions struct {
	NoParseSpecial bool // special tokens in the text stay plain text
	NoAddSpecial   bool // never add bos
}

// SpecialTokens are well-known token ids; -1 where the tokenizer has none.
type SpecialTokens struct {
	BOS, EOS, Pad                           int32
	FIMPrefix, FIMMiddle, FIMSuffix, FIMPad int32
	FileSep, IMStart, IMEnd                 int32
}

// LoadTokenizer loads a tokenizer.json, or a directory holding it (and,
// optionally, tokenizer_config.json).
func LoadTokenizer(path string) (*Tokenizer, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return nil, &Error{Op: "vegas_tokenizer_load", Status: ErrInvalidArgument, Message: "path contains a NUL byte"}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var ptr *C.vegas_tokenizer
	if err := call("vegas_tokenizer_load", func() C.vegas_status { return C.vegas_tokenizer_load(cpath, &ptr) }); err != nil {
		return nil, err
	}
	t := &Tokenizer{ptr: ptr}
	t.g = newGuard(func() { C.vegas_tokenizer_free(ptr) })
	runtime.SetFinalizer(t, (*Tokenizer).Close)
	return t, nil
}

// Close frees a tokenizer from LoadTokenizer; for a model's tokenizer it does
// nothing (the model owns it).
func (t *Tokenizer) Close() error {
	if t.model == nil {
		runtime.SetFinalizer(t, nil)
		t.g.close()
	}
	return nil
}

// use runs fn with the tokenizer pinned open.
func (t *Tokenizer) use(fn func() error) error {
	if !t.g.acquire() {
		return ErrClosed
	}
	defer t.g.release()
	if t.ptr == nil {
		return &Error{Op: "vegas_model_tokenizer", Status: ErrNotFound, Message: "the model has no tokenizer"}
	}
	return fn()
}

// VocabSize is the number of token ids (0 once closed).
func (t *Tokenizer) VocabSize() int {
	n := 0
	_ = t.use(func() error { n = int(C.vegas_tokenizer_vocab_size(t.ptr)); return nil })
	return n
}

// Tokenize encodes UTF-8 text as Hugging Face tokenizers would. opts may be nil.
func (t *Tokenizer) Tokenize(text string, opts *TokenizeOptions) ([]int32, error) {
	var a cArena
	defer a.free()
	co := (*C.vegas_tokenize_options)(a.alloc(unsafe.Sizeof(C.vegas_tokenize_options{})))
	C.vegas_tokenize_options_init_sized(co, C.size_t(unsafe.Sizeof(*co)))
	if opts != nil {
		if opts.NoParseSpecial {
			co.parse_special = 0
		}
		if opts.NoAddSpecial {
			co.add_special = 0
		}
	}
	src := []byte(text)
	var csrc *C.char
	if len(src) > 0 {
		csrc = (*C.char)(unsafe.Pointer(&src[0]))
	}
	ids := make([]int32, len(src)+8) // a token is at least one byte, plus bos
	for {
		var n C.size_t
		err := t.use(func() error {
			return call("vegas_tokenize", func() C.vegas_status {
				return C.vegas_tokenize(t.ptr, csrc, C.size_t(len(src)), co,
					(*C.int32_t)(unsafe.Pointer(&ids[0])), C.size_t(len(ids)), &n)
			})
		})
		if err == nil {
			return ids[:n], nil
		}
		if !errorsIsStatus(err, ErrBufferTooSmall) || int(n) < len(ids) {
			return nil, err
		}
		ids = make([]int32, int(n)+1)
	}
}

// Detokenize decodes ids to UTF-8 text; skipSpecial drops special tokens.
func (t *Tokenizer) Detokenize(ids []int32, skipSpecial bool) (string, error) {
	var cids *C.int32_t
	if len(ids) > 0 {
		cids = (*C.int32_t)(unsafe.Pointer(&ids[0]))
	}
	var out string
	err := t.use(func() error {
		b, err := fillBytes("vegas_detokenize", 16*len(ids)+16, func(buf *C.char, capacity C.size_t, n *C.size_t) C.vegas_status {
			return C.vegas_detokenize(t.ptr, cids, C.size_t(len(ids)), cflag(skipSpecial), buf, capacity, n)
		})
		out = string(b)
		return err
	})
	return out, err
}

// TokenPiece is the raw bytes one token stands for (possibly part of a UTF-8
// character).
func (t *Tokenizer) TokenPiece(id int32) ([]byte, error) {
	var out []byte
	err := t.use(func() error {
		var err error
		out, err = fillBytes("vegas_token_to_piece", 32, func(buf *C.char, capacity C.size_t, n *C.size_t) C.vegas_status {
			return C.vegas_token_to_piece(t.ptr, C.int32_t(id), buf, capacity, n)
		})
		return err
	})
	return out, err
}

// TokenID is the id of a token given by its exact text, e.g. "<|fim_prefix|>";
// an *Error with ErrNotFound if there is none.
func (t *Tokenizer) TokenID(name string) (int32, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return -1, &Error{Op: "vegas_token_by_name", Status: ErrNotFound, Message: "name contains a NUL byte"}
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var id C.int32_t = -1
	err := t.use(func() error {
		return call("vegas_token_by_name", func() C.vegas_status { return C.vegas_token_by_name(t.ptr, cname, &id) })
	})
	return int32(id), err
}

// IsSpecial reports whether id is a special (control) token.
func (t *Tokenizer) IsSpecial(id int32) bool {
	special := false
	_ = t.use(func() error { special = C.vegas_token_is_special(t.ptr, C.int32_t(id)) != 0; return nil })
	return special
}

// SpecialTokens gives the well-known token ids.
func (t *Tokenizer) SpecialTokens() (SpecialTokens, error) {
	var cs C.vegas_special_tokens
	cs.struct_size = C.uint32_t(unsafe.Sizeof(cs))
	err := t.use(func() error {
		return call("vegas_tokenizer_special_tokens", func() C.vegas_status {
			return C.vegas_tokenizer_special_tokens(t.ptr, &cs)
		})
	})
	if err != nil {
		return SpecialTokens{}, err
	}
	return SpecialTokens{
		BOS: int32(cs.bos), EOS: int32(cs.eos), Pad: int32(cs.pad),
		FIMPrefix: int32(cs.fim_prefix), FIMMiddle: int32(cs.fim_middle), FIMSuffix: int32(cs.fim_suffix),
		FIMPad: int32(cs.fim_pad), FileSep: int32(cs.file_sep), IMStart: int32(cs.im_start), IMEnd: int32(cs.im_end),
	}, nil
}

// fillBytes runs a call of the (buf, capacity, needed) convention: once with a
// guess, and again with the size the library asked for.
func fillBytes(op string, guess int, fn func(buf *C.char, capacity C.size_t, n *C.size_t) C.vegas_status) ([]byte, error) {
	buf := make([]byte, guess+1)
	for {
		var n C.size_t
		err := call(op, func() C.vegas_status { return fn((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n) })
		if err == nil {
			return buf[:n], nil
		}
		if !errorsIsStatus(err, ErrBufferTooSmall) || int(n) < len(buf) {
			return nil, err
		}
		buf = make([]byte, int(n)+1)
	}
}

func cflag(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}
