// A byte-level BPE tokenizer: a model's (Model.Tokenizer) or one loaded alone.
using System;
using System.Text;

namespace Vegas
{
    /// <summary>Thread-safe: any number of threads may use one tokenizer at once.</summary>
    public sealed class Tokenizer : IDisposable
    {
        private readonly Owned<TokenizerHandle> _owned;

        internal TokenizerHandle Handle { get { return _owned.Handle; } }
        internal TokenizerHandle RawHandle { get { return _owned.RawHandle; } }

        internal Tokenizer(TokenizerHandle handle) { _owned = new Owned<TokenizerHandle>(handle); }

        /// <summary>
        /// Frees a loaded tokenizer. A model's tokenizer goes with its model (the
        /// model disposes it too); detokenizers made from it keep it alive.
        /// </summary>
        public void Dispose() { _owned.Dispose(); }

        /// <summary>Loads a tokenizer.json, or a directory holding it.</summary>
        public static Tokenizer Load(string path)
        {
            byte[] z = Utf8.Z(path, "vegas_tokenizer_load", "path");
            TokenizerHandle h;
            Library.Check(Native.vegas_tokenizer_load(z, out h), "vegas_tokenizer_load");
            h.Track();
            return new Tokenizer(h);
        }

        /// <summary>Number of token ids.</summary>
        public int VocabSize { get { return Native.vegas_tokenizer_vocab_size(Handle); } }

        /// <summary>Encodes text as Hugging Face tokenizers would.</summary>
        public int[] Tokenize(string text, bool parseSpecial = true, bool addSpecial = true)
        {
            if (text == null) throw Library.Error("vegas_tokenize", Status.InvalidArgument, "text is null");
            byte[] bytes = Encoding.UTF8.GetBytes(text);
            Native.vegas_tokenize_options o;
            Native.vegas_tokenize_options_init(out o);
            o.parse_special = parseSpecial ? 1 : 0;
            o.add_special = addSpecial ? 1 : 0;
            return Buffers.Call<int>("vegas_tokenize", bytes.Length + 8, (int[] ids, UIntPtr cap, out UIntPtr n) =>
                Native.vegas_tokenize(Handle, bytes, (UIntPtr)(ulong)bytes.Length, ref o, ids, cap, out n));
        }

        /// <summary>Decodes ids to text; skipSpecial drops special tokens.</summary>
        public string Detokenize(int[] ids, bool skipSpecial = false)
        {
            if (ids == null) throw Library.Error("vegas_detokenize", Status.InvalidArgument, "ids is null");
            byte[] text = Buffers.Call<byte>("vegas_detokenize", 16 * ids.Length + 16,
                (byte[] buf, UIntPtr cap, out UIntPtr n) => Native.vegas_detokenize(
                    Handle, ids, (UIntPtr)(ulong)ids.Length, skipSpecial ? 1 : 0, buf, cap, out n));
            return Encoding.UTF8.GetString(text);
        }

        /// <summary>The raw bytes of one token (possibly part of a UTF-8 character).</summary>
        public byte[] TokenPiece(int id)
        {
            return Buffers.Call<byte>("vegas_token_to_piece", 32, (byte[] buf, UIntPtr cap, out UIntPtr n) =>
                Native.vegas_token_to_piece(Handle, id, buf, cap, out n));
        }

        /// <summary>The id of a token by its exact text; VegasException (NotFound) if none.</summary>
        public int TokenId(string name)
        {
            int id;
            Library.Check(Native.vegas_token_by_name(Handle, Utf8.Z(name, "vegas_token_by_name", "name"), out id),
                "vegas_token_by_name");
            return id;
        }

        public bool IsSpecial(int id) { return Native.vegas_token_is_special(Handle, id) != 0; }

        public SpecialTokens SpecialTokens
        {
            get
            {
                var s = new Native.vegas_special_tokens();
                s.struct_size = (uint)System.Runtime.InteropServices.Marshal.SizeOf(typeof(Native.vegas_special_tokens));
                Library.Check(Native.vegas_tokenizer_special_tokens(Handle, ref s), "vegas_tokenizer_special_tokens");
                return new SpecialTokens
                {
                    Bos = s.bos, Eos = s.eos, Pad = s.pad, FimPrefix = s.fim_prefix, FimMiddle = s.fim_middle,
                    FimSuffix = s.fim_suffix, FimPad = s.fim_pad, FileSep = s.file_sep, ImStart = s.im_start,
                    ImEnd = s.im_end,
                };
            }
        }

        /// <summary>A streaming detokenizer; it keeps this tokenizer alive.</summary>
        public Detokenizer CreateDetokenizer(bool skipSpecial = false)
        {
            TokenizerHandle tok = Handle;
            DetokenizerHandle h = DependentHandle.Create(tok, () =>
            {
                DetokenizerHandle d;
                Library.Check(Native.vegas_detokenizer_create(tok, skipSpecial ? 1 : 0, out d),
                    "vegas_detokenizer_create");
                return d;
            });
            return new Detokenizer(h);
        }

    }

    /// <summary>Feeds ids one at a time, gives back only complete UTF-8. One thread at a time.</summary>
    public sealed class Detokenizer : IDisposable
    {
        private readonly Owned<DetokenizerHandle> _owned;

        internal DetokenizerHandle Handle { get { return _owned.Handle; } }
        internal DetokenizerHandle RawHandle { get { return _owned.RawHandle; } }

        internal Detokenizer(DetokenizerHandle handle) { _owned = new Owned<DetokenizerHandle>(handle); }

        public void Dispose() { _owned.Dispose(); }

        /// <summary>Adds one token; returns the text that became complete (maybe "").</summary>
        public string Push(int id)
        {
            return Encoding.UTF8.GetString(Buffers.Call<byte>("vegas_detokenizer_push", 64,
                (byte[] buf, UIntPtr cap, out UIntPtr n) => Native.vegas_detokenizer_push(Handle, id, buf, cap, out n)));
        }

        /// <summary>Ends the stream (incomplete bytes become U+FFFD) and resets it.</summary>
        public string Flush()
        {
            return Encoding.UTF8.GetString(Buffers.Call<byte>("vegas_detokenizer_flush", 64,
                (byte[] buf, UIntPtr cap, out UIntPtr n) => Native.vegas_detokenizer_flush(Handle, buf, cap, out n)));
        }
    }
}
