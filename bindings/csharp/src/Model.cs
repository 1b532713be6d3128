// A loaded model: weights, config and tokenizer. Thread-safe.
using System;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

namespace Vegas
{
    public sealed partial class Model : IDisposable
    {
        private readonly Owned<ModelHandle> _owned;

        internal ModelHandle Handle { get { return _owned.Handle; } }
        internal ModelHandle RawHandle { get { return _owned.RawHandle; } }
        private readonly Tokenizer _tokenizer;

        private Model(ModelHandle handle)
        {
            _owned = new Owned<ModelHandle>(handle);
            _tokenizer = new Tokenizer(TokenizerHandle.Borrow(handle, Native.vegas_model_tokenizer(handle)));
        }

        /// <summary>Loads a Hugging Face model directory (config.json, safetensors, tokenizer.json).</summary>
        public static Model Load(string dir, ModelOptions options = null)
        {
            return Load(dir, options, CancellationToken.None);
        }

        /// <summary>Load that stops early (OperationCanceledException) when cancellation is requested.</summary>
        public static Model Load(string dir, ModelOptions options, CancellationToken cancellation)
        {
            byte[] z = Utf8.Z(dir, "vegas_model_load", "dir");
            options = options ?? new ModelOptions();
            Native.vegas_model_options o;
            Native.vegas_model_options_init(out o);
            o.backend = (int)options.Backend;
            o.device_index = options.DeviceIndex;
            o.n_threads = options.Threads;
            Func<float, bool> user = options.Progress;
            var sink = new ProgressSink(p => !cancellation.IsCancellationRequested && (user == null || user(p)));
            GCHandle gch = GCHandle.Alloc(sink);
            try
            {
                o.progress = Trampolines.Progress;
                o.progress_user_data = GCHandle.ToIntPtr(gch);
                ModelHandle h;
                Status s = Native.vegas_model_load(z, ref o, out h);
                if (sink.Error != null) ExceptionDispatchInfo.Capture(sink.Error).Throw();
                if (s == Status.Cancelled) cancellation.ThrowIfCancellationRequested();
                Library.Check(s, "vegas_model_load");
                h.Track();
                return new Model(h);
            }
            finally
            {
                gch.Free();
            }
        }

        /// <summary>The model's tokenizer, usable until the model is disposed.</summary>
        public Tokenizer Tokenizer { get { return _tokenizer; } }

        public ModelInfo Info
        {
            get
            {
                var i = new Native.vegas_model_info();
                i.struct_size = (uint)Marshal.SizeOf(typeof(Native.vegas_model_info));
                i.architecture = new byte[64];
                Library.Check(Native.vegas_model_get_info(Handle, ref i), "vegas_model_get_info");
                int len = Array.IndexOf(i.architecture, (byte)0);
                return new ModelInfo
                {
                    Backend = (Backend)i.backend, Layers = i.n_layers, HiddenSize = i.hidden_size, Heads = i.n_heads,
                    KVHeads = i.n_kv_heads, HeadDim = i.head_dim, VocabSize = i.vocab_size, MaxContext = i.max_context,
                    Params = i.n_params, WeightBytes = i.weight_bytes, KVBytesPerToken = i.kv_bytes_per_token,
                    Architecture = Encoding.UTF8.GetString(i.architecture, 0, len < 0 ? 64 : len),
                };
            }
        }

        /// <summary>Copy bandwidth of the memory holding the weights, bytes read + written per second.</summary>
        public double MeasureBandwidth()
        {
            double bps;
            Library.Check(Native.vegas_model_measure_bandwidth(Handle, out bps), "vegas_model_measure_bandwidth");
            return bps;
        }

        /// <summary>A session on this model; it keeps the model alive.</summary>
        public Session CreateSession(SessionOptions options = null)
        {
            return new Session(this, options ?? new SessionOptions());
        }

        /// <summary>
        /// Completes prompt (special tokens parsed) in a private session. When
        /// cancellation is requested the sequence is cancelled and
        /// OperationCanceledException is thrown.
        /// </summary>
        public Completion Generate(string prompt, GenerateOptions options = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            options = options ?? new GenerateOptions();
            using (Session session = CreateSession(options.Session))
            {
                int seq = session.Submit(MakeRequest(prompt, options, null));
                using (cancellation.Register(() => session.CancelIfOpen(seq)))
                    session.Run();
                return session.Finish(seq, cancellation);
            }
        }

        /// <summary>
        /// Streams the completion of prompt piece by piece, stepping the session as
        /// the caller pulls (on the caller's thread). Stopping the enumeration early
        /// cancels the generation; cancellation throws OperationCanceledException.
        /// </summary>
        public IEnumerable<string> Stream(string prompt, GenerateOptions options = null,
            CancellationToken cancellation = default(CancellationToken))
        {
            options = options ?? new GenerateOptions();
            using (Session session = CreateSession(options.Session))
            {
                var pieces = new Queue<string>();
                int seq = session.Submit(MakeRequest(prompt, options, t => { pieces.Enqueue(t.Piece); return false; }));
                using (cancellation.Register(() => session.CancelIfOpen(seq)))
                {
                    while (true)
                    {
                        int active = session.Step();
                        while (pieces.Count > 0) yield return pieces.Dequeue();
                        if (active == 0) break;
                    }
                }
                session.Finish(seq, cancellation);
            }
        }

        private Request MakeRequest(string prompt, GenerateOptions options, Func<Token, bool> onToken)
        {
            return new Request
            {
                Prompt = Tokenizer.Tokenize(prompt),
                Sampling = options.Sampling,
                MaxTokens = options.MaxTokens,
                IgnoreEos = options.IgnoreEos,
                StopStrings = options.StopStrings,
                OnToken = onToken,
            };
        }

        /// <summary>Releases the model; its sessions keep working until they are disposed.</summary>
        public void Dispose()
        {
            _tokenizer.Dispose();
            _owned.Dispose();
        }
    }
}
