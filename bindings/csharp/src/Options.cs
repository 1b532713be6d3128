// Public option and result types. Option classes start from the library's own
// defaults (the *_options_init functions), so a new default in C shows up here.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;

namespace Vegas
{
    public enum Backend { Auto = 0, Cpu = 1, Cuda = 2 }

    /// <summary>Auto: Vegas rounds while they pay on this device, else vanilla steps.</summary>
    public enum DecodeMode { Vanilla = 0, Vegas = 1, Auto = 2 }

    /// <summary>How a step shares the device between prompts and decoding sequences.</summary>
    public enum Schedule
    {
        /// <summary>Decoding sequences advance in every step, next to prompt chunks.</summary>
        Interleave = 0,
        /// <summary>No sequence decodes while a prompt is being prefilled (full-batch decoding).</summary>
        PrefillFirst = 1,
    }

    public enum FinishReason { None = 0, Eos = 1, Length = 2, Stop = 3, Callback = 4, Cancelled = 5, Error = 6 }

    public sealed class ModelOptions
    {
        public Backend Backend = Backend.Auto;
        /// <summary>CUDA device.</summary>
        public int DeviceIndex;
        /// <summary>CPU threads; 0 = all cores.</summary>
        public int Threads;
        /// <summary>Load progress in [0, 1]; returning false cancels the load.</summary>
        public Func<float, bool> Progress;
    }

    public sealed class SessionOptions
    {
        public ulong KVBytes;
        public int PageSize, MaxBatch, PrefillChunk;
        public DecodeMode Mode;
        /// <summary>Selection policy for DecodeMode.Vegas; null = "vegas" (DecodeMode.Auto:
        /// "vegas+lookup").</summary>
        public string Policy;
        public int Gamma;
        public float Ratio;
        public int MinTokens;
        public float WindowShare;
        public int ScoreKind;
        public int Sink;
        public float TopPMass;
        public Schedule Schedule;

        public SessionOptions()
        {
            Native.vegas_session_options s;
            Native.vegas_session_options_init(out s);
            KVBytes = s.kv_bytes;
            PageSize = s.page_size;
            MaxBatch = s.max_batch;
            PrefillChunk = s.prefill_chunk;
            Mode = (DecodeMode)s.mode;
            Gamma = s.gamma;
            Ratio = s.ratio;
            MinTokens = s.min_tokens;
            WindowShare = s.window_share;
            ScoreKind = s.score_kind;
            Sink = s.sink;
            TopPMass = s.top_p_mass;
            Schedule = (Schedule)s.schedule;
        }

        // The C struct; policy points into memory the caller frees after the call.
        internal Native.vegas_session_options ToNative(List<IntPtr> allocations)
        {
            Native.vegas_session_options s;
            Native.vegas_session_options_init(out s);
            s.kv_bytes = KVBytes;
            s.page_size = PageSize;
            s.max_batch = MaxBatch;
            s.prefill_chunk = PrefillChunk;
            s.mode = (int)Mode;
            if (Policy != null)
            {
                s.policy = Utf8.ToHGlobal(Utf8.Z(Policy, "vegas_session_create", "Policy"));
                allocations.Add(s.policy);
            }
            s.gamma = Gamma;
            s.ratio = Ratio;
            s.min_tokens = MinTokens;
            s.window_share = WindowShare;
            s.score_kind = ScoreKind;
            s.sink = Sink;
            s.top_p_mass = TopPMass;
            s.schedule = (int)Schedule;
            return s;
        }
    }

    public sealed class SamplingOptions
    {
        public float Temperature, TopP, MinP, RepetitionPenalty, PresencePenalty, FrequencyPenalty;
        public int TopK, PenaltyLastN;
        public ulong Seed;

        /// <summary>The library's defaults: greedy.</summary>
        public SamplingOptions()
        {
            Native.vegas_sampling_options s;
            Native.vegas_sampling_options_init(out s);
            Temperature = s.temperature;
            TopK = s.top_k;
            TopP = s.top_p;
            MinP = s.min_p;
            RepetitionPenalty = s.repetition_penalty;
            PresencePenalty = s.presence_penalty;
            FrequencyPenalty = s.frequency_penalty;
            PenaltyLastN = s.penalty_last_n;
            Seed = s.seed;
        }

        internal Native.vegas_sampling_options ToNative()
        {
            Native.vegas_sampling_options s;
            Native.vegas_sampling_options_init(out s);
            s.temperature = Temperature;
            s.top_k = TopK;
            s.top_p = TopP;
            s.min_p = MinP;
            s.repetition_penalty = RepetitionPenalty;
            s.presence_penalty = PresencePenalty;
            s.frequency_penalty = FrequencyPenalty;
            s.penalty_last_n = PenaltyLastN;
            s.seed = Seed;
            return s;
        }
    }

    /// <summary>One sequence to generate.</summary>
    public sealed class Request
    {
        /// <summary>Prompt token ids, at least one.</summary>
        public int[] Prompt;
        /// <summary>null = greedy.</summary>
        public SamplingOptions Sampling;
        public int MaxTokens = 128;
        public bool IgnoreEos;
        public int[] StopIds;
        /// <summary>The match is not part of the output.</summary>
        public string[] StopStrings;
        /// <summary>
        /// Called once per committed token on the thread that steps the session;
        /// returning true stops the sequence (FinishReason.Callback), as a non-zero
        /// return does in C and true in Python, Rust and Go. An exception
        /// stops it too and is rethrown from Step/Run.
        /// </summary>
        public Func<Token, bool> OnToken;
    }

    /// <summary>Options of Model.Generate and Model.Stream.</summary>
    public sealed class GenerateOptions
    {
        public int MaxTokens = 128;
        public SamplingOptions Sampling;
        public SessionOptions Session;
        public bool IgnoreEos;
        public string[] StopStrings;
    }

    public sealed class Completion
    {
        public string Text { get; internal set; }
        public int[] Tokens { get; internal set; }
        public SequenceInfo Info { get; internal set; }
    }

    public struct SequenceInfo
    {
        public FinishReason FinishReason;
        /// <summary>Of a sequence that finished with FinishReason.Error.</summary>
        public Status Status;
        public int PromptTokens, GeneratedTokens;
        public long Rounds, Drafted, Accepted;
        public double TokensPerRound, PrefillSeconds, DecodeSeconds;
    }

    public sealed class SessionStats
    {
        public int Gamma;
        public long Rounds, Drafted, Accepted, Committed;
        public double TokensPerRound, DraftSeconds, VerifySeconds, SelectSeconds;
        /// <summary>Rounds that drafted position i (i &lt; Gamma).</summary>
        public long[] DraftedAt;
        /// <summary>Rounds whose draft i was accepted.</summary>
        public long[] AcceptedAt;
    }

    public sealed class ModelInfo
    {
        public Backend Backend;
        public int Layers, HiddenSize, Heads, KVHeads, HeadDim, VocabSize, MaxContext;
        public ulong Params, WeightBytes, KVBytesPerToken;
        public string Architecture;
    }

    /// <summary>Well-known token ids; -1 where the tokenizer has none.</summary>
    public sealed class SpecialTokens
    {
        public int Bos, Eos, Pad, FimPrefix, FimMiddle, FimSuffix, FimPad, FileSep, ImStart, ImEnd;
    }
}
