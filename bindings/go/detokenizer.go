package vegas

// #include <vegas.h>
import "C"

import "runtime"

// Detokenizer turns a stream of token ids into text, giving back only complete
// UTF-8. One goroutine at a time; it keeps its tokenizer (and model) open.
type Detokenizer struct {
	g   *guard
	ptr *C.vegas_detokenizer
	tok *Tokenizer
}

// NewDetokenizer starts a stream; skipSpecial drops special tokens.
func (t *Tokenizer) NewDetokenizer(skipSpecial bool) (*Detokenizer, error) {
	if !t.g.acquire() {
		return nil, ErrClosed
	}
	var ptr *C.vegas_detokenizer
	err := t.use(func() error {
		return call("vegas_detokenizer_create", func() C.vegas_status {
			return C.vegas_detokenizer_create(t.ptr, cflag(skipSpecial), &ptr)
		})
	})
	if err != nil {
		t.g.release()
		return nil, err
	}
	// The tokenizer stays acquired until the detokenizer is freed.
	d := &Detokenizer{ptr: ptr, tok: t}
	d.g = newGuard(func() {
		C.vegas_detokenizer_free(ptr)
		t.g.release()
	})
	runtime.SetFinalizer(d, (*Detokenizer).Close)
	return d, nil
}

// Push adds one token and returns the text that became complete (maybe "").
func (d *Detokenizer) Push(id int32) (string, error) {
	return d.fill("vegas_detokenizer_push", func(buf *C.char, capacity C.size_t, n *C.size_t) C.vegas_status {
		return C.vegas_detokenizer_push(d.ptr, C.int32_t(id), buf, capacity, n)
	})
}

// Flush ends the stream (pending incomplete bytes become U+FFFD) and resets it.
func (d *Detokenizer) Flush() (string, error) {
	return d.fill("vegas_detokenizer_flush", func(buf *C.char, capacity C.size_t, n *C.size_t) C.vegas_status {
		return C.vegas_detokenizer_flush(d.ptr, buf, capacity, n)
	})
}

func (d *Detokenizer) fill(op string, fn func(*C.char, C.size_t, *C.size_t) C.vegas_status) (string, error) {
	if !d.g.acquire() {
		return "", ErrClosed
	}
	defer d.g.release()
	b, err := fillBytes(op, 64, fn)
	return string(b), err
}

// Close frees the detokenizer. Closing twice is a no-op.
func (d *Detokenizer) Close() error {
	runtime.SetFinalizer(d, nil)
	d.g.close()
	return nil
}
