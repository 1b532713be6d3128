// The P/Invoke declarations of vegas.h and the structs they take, mirrored
// field for field (names as in C, so the layout test can match them by name).
using System;
using System.Runtime.InteropServices;

namespace Vegas
{
    internal static class Native
    {
        // "vegas" finds libvegas.so / vegas.dll / libvegas.dylib. Unity IL2CPP builds
        // that link the library statically (iOS) would use "__Internal" instead.
        internal const string Library = "vegas";

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int TokenFn(int seqId, int token, IntPtr piece, UIntPtr pieceLen, IntPtr userData);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate int ProgressFn(float progress, IntPtr userData);

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_tokenize_options
        {
            public uint struct_size;
            public int parse_special;
            public int add_special;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_special_tokens
        {
            public uint struct_size;
            public int bos, eos, pad, fim_prefix, fim_middle, fim_suffix, fim_pad, file_sep, im_start, im_end;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_model_options
        {
            public uint struct_size;
            public int backend;
            public int device_index;
            public int n_threads;
            public IntPtr progress;
            public IntPtr progress_user_data;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_model_info
        {
            public uint struct_size;
            public int backend;
            public int n_layers;
            public int hidden_size;
            public int n_heads;
            public int n_kv_heads;
            public int head_dim;
            public int vocab_size;
            public int max_context;
            public ulong n_params;
            public ulong weight_bytes;
            public ulong kv_bytes_per_token;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = 64)]
            public byte[] architecture;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_session_options
        {
            public uint struct_size;
            public ulong kv_bytes;
            public int page_size;
            public int max_batch;
            public int prefill_chunk;
            public int mode;
            public IntPtr policy;
            public int gamma;
            public float ratio;
            public int min_tokens;
            public float window_share;
            public int score_kind;
            public int sink;
            public float top_p_mass;
            public IntPtr select_policy;
            public int schedule;
            public IntPtr profile_path;
            public int prefix_cache;
            public int kv_type;
            public int tree_branches;
            public int tree_depth;
            public IntPtr draft_model;
            public int draft_window;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_sampling_options
        {
            public uint struct_size;
            public float temperature;
            public int top_k;
            public float top_p;
            public float min_p;
            public float repetition_penalty;
            public float presence_penalty;
            public float frequency_penalty;
            public int penalty_last_n;
            public ulong seed;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_request
        {
            public uint struct_size;
            public IntPtr prompt;
            public UIntPtr n_prompt;
            public IntPtr sampling;
            public int max_tokens;
            public int ignore_eos;
            public IntPtr stop_ids;
            public UIntPtr n_stop_ids;
            public IntPtr stop_strings;
            public UIntPtr n_stop_strings;
            public IntPtr on_token;
            public IntPtr user_data;
            public int logprobs;
            public int top_logprobs;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_sequence_info
        {
            public uint struct_size;
            public int finish_reason;
            public int status;
            public int n_prompt;
            public int n_generated;
            public long rounds;
            public long drafted;
            public long accepted;
            public double tokens_per_round;
            public double prefill_seconds;
            public double decode_seconds;
            public int gamma;
            public float ratio;
            public long switches;
        }

        internal const int MaxGamma = 32;

        [StructLayout(LayoutKind.Sequential)]
        internal struct vegas_session_stats
        {
            public uint struct_size;
            public int gamma;
            public long rounds;
            public long drafted;
            public long accepted;
            public long committed;
            public double tokens_per_round;
            public double draft_seconds;
            public double verify_seconds;
            public double select_seconds;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = MaxGamma)]
            public long[] drafted_at;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = MaxGamma)]
            public long[] accepted_at;
            public long switches;
        }

        // The *_init_sized functions are told this binding's size of the struct: a
        // library whose struct has grown (fields are only ever appended) writes only this
        // binding's part, one whose struct is smaller leaves the rest zero, and
        // struct_size says the binding's size (vegas.h, "Structs that grow").
        internal static T Init<T>(Action<IntPtr, UIntPtr> init) where T : struct
        {
            int size = Marshal.SizeOf(typeof(T));
            IntPtr block = Marshal.AllocHGlobal(size);
            try
            {
                for (int i = 0; i < size; i++) Marshal.WriteByte(block, i, 0);
                init(block, (UIntPtr)size);
                return (T)Marshal.PtrToStructure(block, typeof(T));
            }
            finally
            {
                Marshal.FreeHGlobal(block);
            }
        }

        // ------------------------------------------------------------ version, errors
        [DllImport(Library)] internal static extern uint vegas_version_number();
        [DllImport(Library)] internal static extern IntPtr vegas_version();
        [DllImport(Library)] internal static extern IntPtr vegas_status_name(Status status);
        [DllImport(Library)] internal static extern IntPtr vegas_last_error();

        // ------------------------------------------------------------------ tokenizer
        [DllImport(Library)]
        internal static extern Status vegas_tokenizer_load(byte[] path, out TokenizerHandle tokenizer);
        [DllImport(Library)] internal static extern void vegas_tokenizer_free(IntPtr tokenizer);
        [DllImport(Library)] internal static extern int vegas_tokenizer_vocab_size(TokenizerHandle tokenizer);
        [DllImport(Library)] internal static extern void vegas_tokenize_options_init_sized(IntPtr options, UIntPtr size);
        internal static void vegas_tokenize_options_init(out vegas_tokenize_options options)
        {
            options = Init<vegas_tokenize_options>(vegas_tokenize_options_init_sized);
        }
        [DllImport(Library)]
        internal static extern Status vegas_tokenize(TokenizerHandle tokenizer, byte[] text, UIntPtr textLen,
            ref vegas_tokenize_options options, int[] ids, UIntPtr capacity, out UIntPtr nIds);
        [DllImport(Library)]
        internal static extern Status vegas_detokenize(TokenizerHandle tokenizer, int[] ids, UIntPtr nIds,
            int skipSpecial, byte[] text, UIntPtr capacity, out UIntPtr nBytes);
        [DllImport(Library)]
        internal static extern Status vegas_token_to_piece(TokenizerHandle tokenizer, int id, byte[] bytes,
            UIntPtr capacity, out UIntPtr nBytes);
        [DllImport(Library)]
        internal static extern Status vegas_token_by_name(TokenizerHandle tokenizer, byte[] name, out int id);
        [DllImport(Library)] internal static extern int vegas_token_is_special(TokenizerHandle tokenizer, int id);
        [DllImport(Library)]
        internal static extern Status vegas_tokenizer_special_tokens(TokenizerHandle tokenizer,
            ref vegas_special_tokens special);

        [DllImport(Library)]
        internal static extern Status vegas_detokenizer_create(TokenizerHandle tokenizer, int skipSpecial,
            out DetokenizerHandle detokenizer);
        [DllImport(Library)] internal static extern void vegas_detokenizer_free(IntPtr detokenizer);
        [DllImport(Library)]
        internal static extern Status vegas_detokenizer_push(DetokenizerHandle detokenizer, int id, byte[] text,
            UIntPtr capacity, out UIntPtr nBytes);
        [DllImport(Library)]
        internal static extern Status vegas_detokenizer_flush(DetokenizerHandle detokenizer, byte[] text,
            UIntPtr capacity, out UIntPtr nBytes);

        // ---------------------------------------------------------------------- model
        [DllImport(Library)] internal static extern void vegas_model_options_init_sized(IntPtr options, UIntPtr size);
        internal static void vegas_model_options_init(out vegas_model_options options)
        {
            options = Init<vegas_model_options>(vegas_model_options_init_sized);
        }
        [DllImport(Library)]
        internal static extern Status vegas_model_load(byte[] dir, ref vegas_model_options options, out ModelHandle model);
        [DllImport(Library)] internal static extern void vegas_model_free(IntPtr model);
        [DllImport(Library)] internal static extern IntPtr vegas_model_tokenizer(ModelHandle model);
        [DllImport(Library)]
        internal static extern Status vegas_model_get_info(ModelHandle model, ref vegas_model_info info);
        [DllImport(Library)]
        internal static extern Status vegas_model_measure_bandwidth(ModelHandle model, out double bytesPerSecond);

        // -------------------------------------------------------------------- session
        [DllImport(Library)] internal static extern void vegas_session_options_init_sized(IntPtr options, UIntPtr size);
        internal static void vegas_session_options_init(out vegas_session_options options)
        {
            options = Init<vegas_session_options>(vegas_session_options_init_sized);
        }
        [DllImport(Library)]
        internal static extern Status vegas_session_create(ModelHandle model, ref vegas_session_options options,
            out SessionHandle session);
        [DllImport(Library)] internal static extern void vegas_session_free(IntPtr session);
        [DllImport(Library)] internal static extern void vegas_sampling_options_init_sized(IntPtr options, UIntPtr size);
        internal static void vegas_sampling_options_init(out vegas_sampling_options options)
        {
            options = Init<vegas_sampling_options>(vegas_sampling_options_init_sized);
        }
        [DllImport(Library)] internal static extern void vegas_request_init_sized(IntPtr options, UIntPtr size);
        internal static void vegas_request_init(out vegas_request options)
        {
            options = Init<vegas_request>(vegas_request_init_sized);
        }
        [DllImport(Library)]
        internal static extern Status vegas_session_submit(SessionHandle session, ref vegas_request request, out int seqId);
        [DllImport(Library)] internal static extern Status vegas_session_step(SessionHandle session, out int nActive);
        [DllImport(Library)] internal static extern Status vegas_session_run(SessionHandle session);
        [DllImport(Library)] internal static extern Status vegas_session_cancel(SessionHandle session, int seqId);
        [DllImport(Library)]
        internal static extern Status vegas_sequence_get_info(SessionHandle session, int seqId, ref vegas_sequence_info info);
        [DllImport(Library)]
        internal static extern Status vegas_sequence_tokens(SessionHandle session, int seqId, int[] ids,
            UIntPtr capacity, out UIntPtr nIds);
        [DllImport(Library)]
        internal static extern Status vegas_sequence_text(SessionHandle session, int seqId, byte[] text,
            UIntPtr capacity, out UIntPtr nBytes);
        [DllImport(Library)] internal static extern Status vegas_sequence_release(SessionHandle session, int seqId);
        [DllImport(Library)]
        internal static extern Status vegas_session_get_stats(SessionHandle session, ref vegas_session_stats stats);
    }
}
