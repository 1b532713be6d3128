// A session decodes sequences together on one KV pool.
using System;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Vegas
{
    /// <summary>
    /// One thread at a time drives a session (Submit, Step, Run, queries); Cancel
    /// and Dispose may come from any thread. It keeps its model alive.
    /// </summary>
    public sealed class Session : IDisposable
    {
        /// <summary>Pass to Cancel to cancel every sequence.</summary>
        public const int AllSequences = -1;

        private readonly Owned<SessionHandle> _owned;

        internal SessionHandle Handle { get { return _owned.Handle; } }
        internal SessionHandle RawHandle { get { return _owned.RawHandle; } }

        internal Session(Model model, SessionOptions options)
        {
            _owned = new Owned<SessionHandle>(Create(model.Handle, options));
        }

        private static SessionHandle Create(ModelHandle model, SessionOptions options)
        {
            var allocations = new List<IntPtr>();
            try
            {
                Native.vegas_session_options o = options.ToNative(allocations);
                return DependentHandle.Create(model, () =>
                {
                    SessionHandle h;
                    Library.Check(Native.vegas_session_create(model, ref o, out h), "vegas_session_create");
                    return h;
                });
            }
            finally
            {
                foreach (IntPtr p in allocations) Marshal.FreeHGlobal(p);
            }
        }

        /// <summary>Adds a sequence (it starts at the next Step) and returns its id.</summary>
        public int Submit(Request request)
        {
            if (request == null) throw Library.Error("vegas_session_submit", Status.InvalidArgument, "request is null");
            var pins = new List<GCHandle>();
            var allocations = new List<IntPtr>();
            GCHandle sink = default(GCHandle);
            try
            {
                Native.vegas_request r;
                Native.vegas_request_init(out r);
                r.prompt = Pin(request.Prompt, pins);
                r.n_prompt = (UIntPtr)(ulong)(request.Prompt == null ? 0 : request.Prompt.Length);
                if (request.Sampling != null)
                {
                    Native.vegas_sampling_options so = request.Sampling.ToNative();
                    r.sampling = Marshal.AllocHGlobal(Marshal.SizeOf(typeof(Native.vegas_sampling_options)));
                    allocations.Add(r.sampling);
                    Marshal.StructureToPtr(so, r.sampling, false);
                }
                r.max_tokens = request.MaxTokens;
                r.ignore_eos = request.IgnoreEos ? 1 : 0;
                r.stop_ids = Pin(request.StopIds, pins);
                r.n_stop_ids = (UIntPtr)(ulong)(request.StopIds == null ? 0 : request.StopIds.Length);
                if (request.StopStrings != null && request.StopStrings.Length > 0)
                {
                    var ptrs = new IntPtr[request.StopStrings.Length];
                    for (int i = 0; i < ptrs.Length; i++)
                    {
                        ptrs[i] = Utf8.ToHGlobal(Utf8.Z(request.StopStrings[i], "vegas_session_submit", "a stop string"));
                        allocations.Add(ptrs[i]);
                    }
                    r.stop_strings = Pin(ptrs, pins);
                    r.n_stop_strings = (UIntPtr)(ulong)ptrs.Length;
                }
                if (request.OnToken != null)
                {
                    sink = GCHandle.Alloc(new TokenSink(request.OnToken));
                    r.on_token = Trampolines.Token;
                    r.user_data = GCHandle.ToIntPtr(sink);
                }
                int seq;
                Library.Check(Native.vegas_session_submit(Handle, ref r, out seq), "vegas_session_submit");
                if (sink.IsAllocated)
                {
                    RawHandle.AddSink(seq, sink);
                    sink = default(GCHandle); // the handle owns it now
                }
                return seq;
            }
            finally
            {
                if (sink.IsAllocated) sink.Free();
                foreach (GCHandle p in pins) p.Free();
                foreach (IntPtr p in allocations) Marshal.FreeHGlobal(p);
            }
        }

        private static IntPtr Pin(Array a, List<GCHandle> pins)
        {
            if (a == null || a.Length == 0) return IntPtr.Zero;
            GCHandle h = GCHandle.Alloc(a, GCHandleType.Pinned);
            pins.Add(h);
            return h.AddrOfPinnedObject();
        }

        /// <summary>One decoding round for every active sequence; returns how many are still active.</summary>
        public int Step()
        {
            int active;
            Status s = Native.vegas_session_step(Handle, out active);
            string message = s == Status.Ok ? null : Utf8.FromNative(Native.vegas_last_error());
            RethrowCallbackError();
            if (message != null) throw new VegasException("vegas_session_step", s, message);
            return active;
        }

        /// <summary>Steps until no sequence is active.</summary>
        public void Run()
        {
            Status s = Native.vegas_session_run(Handle);
            string message = s == Status.Ok ? null : Utf8.FromNative(Native.vegas_last_error());
            RethrowCallbackError();
            if (message != null) throw new VegasException("vegas_session_run", s, message);
        }

        // An exception of a token callback, thrown again on the stepping thread.
        private void RethrowCallbackError()
        {
            foreach (object target in RawHandle.SinkTargets())
            {
                var sink = target as TokenSink;
                if (sink != null && sink.Error != null)
                {
                    Exception e = sink.Error;
                    sink.Error = null;
                    ExceptionDispatchInfo.Capture(e).Throw();
                }
            }
        }

        /// <summary>Asks a sequence (or AllSequences) to stop at the next round; safe from any thread.</summary>
        public void Cancel(int seq = AllSequences)
        {
            Library.Check(Native.vegas_session_cancel(Handle, seq), "vegas_session_cancel");
        }

        // For cancellation callbacks, which may fire after the session was disposed.
        internal void CancelIfOpen(int seq)
        {
            try
            {
                Native.vegas_session_cancel(RawHandle, seq);
            }
            catch (ObjectDisposedException)
            {
            }
        }

        public SequenceInfo GetSequenceInfo(int seq)
        {
            var i = new Native.vegas_sequence_info();
            i.struct_size = (uint)Marshal.SizeOf(typeof(Native.vegas_sequence_info));
            Library.Check(Native.vegas_sequence_get_info(Handle, seq, ref i), "vegas_sequence_get_info");
            return new SequenceInfo
            {
                FinishReason = (FinishReason)i.finish_reason, Status = (Status)i.status, PromptTokens = i.n_prompt,
                GeneratedTokens = i.n_generated, Rounds = i.rounds, Drafted = i.drafted, Accepted = i.accepted,
                TokensPerRound = i.tokens_per_round, PrefillSeconds = i.prefill_seconds,
                DecodeSeconds = i.decode_seconds,
            };
        }

        /// <summary>The generated token ids (stop tokens excluded).</summary>
        public int[] GetTokens(int seq)
        {
            return Buffers.Call<int>("vegas_sequence_tokens", 64, (int[] ids, UIntPtr cap, out UIntPtr n) =>
                Native.vegas_sequence_tokens(Handle, seq, ids, cap, out n));
        }

        /// <summary>The generated text (stop string excluded).</summary>
        public string GetText(int seq)
        {
            return System.Text.Encoding.UTF8.GetString(Buffers.Call<byte>("vegas_sequence_text", 256,
                (byte[] buf, UIntPtr cap, out UIntPtr n) => Native.vegas_sequence_text(Handle, seq, buf, cap, out n)));
        }

        /// <summary>Forgets a sequence (a running one is cancelled) and frees its KV.</summary>
        public void Release(int seq)
        {
            Library.Check(Native.vegas_sequence_release(Handle, seq), "vegas_sequence_release");
            RawHandle.FreeSink(seq);
        }

        public SessionStats GetStats()
        {
            var s = new Native.vegas_session_stats();
            s.struct_size = (uint)Marshal.SizeOf(typeof(Native.vegas_session_stats));
            s.drafted_at = new long[Native.MaxGamma];
            s.accepted_at = new long[Native.MaxGamma];
            Library.Check(Native.vegas_session_get_stats(Handle, ref s), "vegas_session_get_stats");
            int n = Math.Max(0, Math.Min(s.gamma, Native.MaxGamma));
            var stats = new SessionStats
            {
                Gamma = s.gamma, Rounds = s.rounds, Drafted = s.drafted, Accepted = s.accepted,
                Committed = s.committed, TokensPerRound = s.tokens_per_round, DraftSeconds = s.draft_seconds,
                VerifySeconds = s.verify_seconds, SelectSeconds = s.select_seconds,
                DraftedAt = new long[n], AcceptedAt = new long[n],
            };
            Array.Copy(s.drafted_at, stats.DraftedAt, n);
            Array.Copy(s.accepted_at, stats.AcceptedAt, n);
            return stats;
        }

        // The completion of a finished sequence: OperationCanceledException when the
        // token cancelled it, VegasException when it failed.
        internal Completion Finish(int seq, CancellationToken cancellation)
        {
            SequenceInfo info = GetSequenceInfo(seq);
            if (info.FinishReason == FinishReason.Cancelled) cancellation.ThrowIfCancellationRequested();
            if (info.FinishReason == FinishReason.Error)
                throw new VegasException("vegas_session_step", info.Status, "the sequence failed with " +
                    Library.StatusName(info.Status));
            return new Completion { Text = GetText(seq), Tokens = GetTokens(seq), Info = info };
        }

        /// <summary>
        /// Frees the session. If another thread (or a token callback up the stack)
        /// is inside Step or Run, its sequences are cancelled and the memory goes
        /// when that call returns.
        /// </summary>
        public void Dispose()
        {
            CancelIfOpen(AllSequences);
            _owned.Dispose();
        }
    }
}
