//! Tokenizers and the streaming detokenizer.
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::buffer::{c_path, c_string, read_bytes, read_ids, read_string};
use crate::error::{check, Result};
use vegas_sys as sys;

/// Well-known token ids; -1 where the tokenizer has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecialTokens {
    pub bos: i32,
    pub eos: i32,
    pub pad: i32,
    pub fim_prefix: i32,
    pub fim_middle: i32,
    pub fim_suffix: i32,
    pub fim_pad: i32,
    pub file_sep: i32,
    pub im_start: i32,
    pub im_end: i32,
}

/// A byte-level BPE tokenizer. `Tokenizer::load` owns one (`Tokenizer<'static>`);
/// `Model::tokenizer` borrows the model's, and the lifetime keeps the model alive.
pub struct Tokenizer<'a> {
    ptr: NonNull<sys::vegas_tokenizer>,
    owned: bool,
    _model: PhantomData<&'a ()>,
}

// SAFETY: a tokenizer is immutable after load; vegas.h allows every const call on it from
// any number of threads at once, and freeing it needs exclusive ownership (Drop).
unsafe impl Send for Tokenizer<'_> {}
unsafe impl Sync for Tokenizer<'_> {}

impl Tokenizer<'static> {
    /// Loads a Hugging Face tokenizer.json (the file, or a directory holding it).
    pub fn load(path: impl AsRef<Path>) -> Result<Tokenizer<'static>> {
        let path = c_path(path.as_ref())?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::vegas_tokenizer_load(path.as_ptr(), &mut out) })?;
        Ok(Tokenizer {
            ptr: NonNull::new(out).expect("vegas_tokenizer_load gave NULL"),
            owned: true,
            _model: PhantomData,
        })
    }
}

impl<'a> Tokenizer<'a> {
    /// A borrowed tokenizer, valid for 'a.
    pub(crate) fn borrowed(ptr: NonNull<sys::vegas_tokenizer>) -> Tokenizer<'a> {
        Tokenizer {
            ptr,
            owned: false,
            _model: PhantomData,
        }
    }

    fn raw(&self) -> *const sys::vegas_tokenizer {
        self.ptr.as_ptr()
    }

    /// Number of token ids (model vocabulary plus added tokens).
    pub fn vocab_size(&self) -> i32 {
        unsafe { sys::vegas_tokenizer_vocab_size(self.raw()) }
    }

    /// Token ids of `text` with the defaults: special tokens parsed, bos added when the
    /// tokenizer config asks for it.
    pub fn encode(&self, text: &str) -> Result<Vec<i32>> {
        self.encode_with(text, true, true)
    }

    pub fn encode_with(
        &self,
        text: &str,
        parse_special: bool,
        add_special: bool,
    ) -> Result<Vec<i32>> {
        let mut opts = crate::options::init(sys::vegas_tokenize_options_init_sized);
        opts.parse_special = parse_special as i32;
        opts.add_special = add_special as i32;
        read_ids(text.len() + 8, |ids, cap, n| unsafe {
            sys::vegas_tokenize(
                self.raw(),
                text.as_ptr() as *const c_char,
                text.len(),
                &opts,
                ids,
                cap,
                n,
            )
        })
    }

    /// The text of `ids` (bytes that are not valid UTF-8 become U+FFFD).
    pub fn decode(&self, ids: &[i32], skip_special: bool) -> Result<String> {
        read_string(4 * ids.len() + 16, |buf, cap, n| unsafe {
            sys::vegas_detokenize(
                self.raw(),
                ids.as_ptr(),
                ids.len(),
                skip_special as i32,
                buf,
                cap,
                n,
            )
        })
    }

    /// The raw bytes one token stands for (may be part of a UTF-8 character).
    pub fn piece(&self, id: i32) -> Result<Vec<u8>> {
        read_bytes(32, |buf, cap, n| unsafe {
            sys::vegas_token_to_piece(self.raw(), id, buf, cap, n)
        })
    }

    /// The id of a token given by its exact text; `Status::NotFound` if none.
    pub fn token_id(&self, name: &str) -> Result<i32> {
        let name = c_string(name, "the token name")?;
        let mut id = -1;
        check(unsafe { sys::vegas_token_by_name(self.raw(), name.as_ptr(), &mut id) })?;
        Ok(id)
    }

    pub fn is_special(&self, id: i32) -> bool {
        unsafe { sys::vegas_token_is_special(self.raw(), id) != 0 }
    }

    pub fn special_tokens(&self) -> Result<SpecialTokens> {
        let mut c: sys::vegas_special_tokens = unsafe { std::mem::zeroed() };
        c.struct_size = std::mem::size_of::<sys::vegas_special_tokens>() as u32;
        check(unsafe { sys::vegas_tokenizer_special_tokens(self.raw(), &mut c) })?;
        Ok(SpecialTokens {
            bos: c.bos,
            eos: c.eos,
            pad: c.pad,
            fim_prefix: c.fim_prefix,
            fim_middle: c.fim_middle,
            fim_suffix: c.fim_suffix,
            fim_pad: c.fim_pad,
            file_sep: c.file_sep,
            im_start: c.im_start,
            im_end: c.im_end,
        })
    }

    /// A streaming detokenizer borrowing this tokenizer.
    pub fn detokenizer(&self, skip_special: bool) -> Result<Detokenizer<'_>> {
        let mut out = ptr::null_mut();
        check(unsafe { sys::vegas_detokenizer_create(self.raw(), skip_special as i32, &mut out) })?;
        Ok(Detokenizer {
            ptr: NonNull::new(out).expect("vegas_detokenizer_create gave NULL"),
            _tokenizer: PhantomData,
        })
    }
}

impl Drop for Tokenizer<'_> {
    fn drop(&mut self) {
        if self.owned {
            unsafe { sys::vegas_tokenizer_free(self.ptr.as_ptr()) }
        }
    }
}

impl std::fmt::Debug for Tokenizer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("owned", &self.owned)
            .finish()
    }
}

/// Feeds ids one at a time and returns only complete UTF-8 (a token can end inside a
/// character). Borrows its tokenizer, which therefore outlives it.
pub struct Detokenizer<'t> {
    ptr: NonNull<sys::vegas_detokenizer>,
    _tokenizer: PhantomData<&'t Tokenizer<'t>>,
}

// SAFETY: a detokenizer is used by one thread at a time (&mut self) and may move between
// threads; its tokenizer is Sync. Not Sync: push/flush mutate it.
unsafe impl Send for Detokenizer<'_> {}

impl Detokenizer<'_> {
    /// Adds one token; returns the text that became complete (possibly empty).
    pub fn push(&mut self, id: i32) -> Result<String> {
        let p = self.ptr.as_ptr();
        read_string(64, |buf, cap, n| unsafe {
            sys::vegas_detokenizer_push(p, id, buf, cap, n)
        })
    }

    /// Ends the stream (pending bytes come out as U+FFFD) and resets it.
    pub fn flush(&mut self) -> Result<String> {
        let p = self.ptr.as_ptr();
        read_string(64, |buf, cap, n| unsafe {
            sys::vegas_detokenizer_flush(p, buf, cap, n)
        })
    }
}

impl Drop for Detokenizer<'_> {
    fn drop(&mut self) {
        unsafe { sys::vegas_detokenizer_free(self.ptr.as_ptr()) }
    }
}
