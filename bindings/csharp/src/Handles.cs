// SafeHandles for the C objects. The runtime add-refs a SafeHandle for the length
// of every P/Invoke call, so Dispose on another thread (or the finalizer) never
// frees an object a call is still using; handles that borrow another object hold
// a reference to it (DangerousAddRef) until they are released themselves.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;

namespace Vegas
{
    // Counts native objects and callback GCHandles not freed yet, so the tests can
    // prove that Dispose and the finalizers free everything.
    internal static class LiveCount
    {
        internal static long Objects;
        internal static long Sinks;
    }

    internal sealed class ModelHandle : SafeHandle
    {
        private bool _tracked;

        private ModelHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        // Called once the load succeeded (the marshaller makes invalid handles too).
        internal void Track()
        {
            _tracked = true;
            Interlocked.Increment(ref LiveCount.Objects);
        }

        protected override bool ReleaseHandle()
        {
            Native.vegas_model_free(handle);
            if (_tracked) Interlocked.Decrement(ref LiveCount.Objects);
            return true;
        }
    }

    /// <summary>A handle that keeps another one alive while it lives.</summary>
    internal abstract class DependentHandle : SafeHandle
    {
        private SafeHandle _owner;
        private bool _tracked;

        protected DependentHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        // Makes a handle that depends on owner. The owner is add-ref'd before the
        // C call that makes the handle (so it cannot go in between) and released
        // with the handle, or at once if the call fails.
        internal static T Create<T>(SafeHandle owner, Func<T> create) where T : DependentHandle
        {
            bool added = false;
            owner.DangerousAddRef(ref added); // ObjectDisposedException once owner is disposed
            T h = null;
            try
            {
                h = create();
            }
            finally
            {
                if (h == null || h.IsInvalid) owner.DangerousRelease();
            }
            h._owner = owner;
            h.Track();
            return h;
        }

        // Called once the handle is known valid (the marshaller makes invalid ones too).
        internal void Track()
        {
            _tracked = true;
            Interlocked.Increment(ref LiveCount.Objects);
        }

        protected override bool ReleaseHandle()
        {
            Free();
            if (_owner != null) _owner.DangerousRelease();
            if (_tracked) Interlocked.Decrement(ref LiveCount.Objects);
            return true;
        }

        protected abstract void Free();
    }

    /// <summary>A loaded tokenizer (owned) or a model's tokenizer (borrowed).</summary>
    internal sealed class TokenizerHandle : DependentHandle
    {
        private bool _borrowed;

        private TokenizerHandle() { }

        // The model's own tokenizer: never freed here, and it keeps the model alive.
        internal static TokenizerHandle Borrow(ModelHandle model, IntPtr tokenizer)
        {
            return Create(model, () =>
            {
                var h = new TokenizerHandle();
                h._borrowed = true;
                h.SetHandle(tokenizer);
                return h;
            });
        }

        protected override void Free()
        {
            if (!_borrowed) Native.vegas_tokenizer_free(handle);
        }
    }

    internal sealed class DetokenizerHandle : DependentHandle
    {
        private DetokenizerHandle() { }

        protected override void Free() { Native.vegas_detokenizer_free(handle); }
    }

    /// <summary>A session; it keeps its model and its callbacks' targets alive.</summary>
    internal sealed class SessionHandle : DependentHandle
    {
        // GCHandles of the token callbacks' sinks by sequence id: freed with the
        // sequence or, after vegas_session_free, with the session.
        private readonly Dictionary<int, GCHandle> _sinks = new Dictionary<int, GCHandle>();

        private SessionHandle() { }

        internal void AddSink(int seq, GCHandle sink)
        {
            lock (_sinks) _sinks[seq] = sink;
            Interlocked.Increment(ref LiveCount.Sinks);
        }

        internal void FreeSink(int seq)
        {
            lock (_sinks)
            {
                GCHandle h;
                if (_sinks.TryGetValue(seq, out h))
                {
                    h.Free();
                    _sinks.Remove(seq);
                    Interlocked.Decrement(ref LiveCount.Sinks);
                }
            }
        }

        internal List<object> SinkTargets()
        {
            var targets = new List<object>();
            lock (_sinks)
                foreach (var h in _sinks.Values) targets.Add(h.Target);
            return targets;
        }

        protected override void Free()
        {
            Native.vegas_session_free(handle);
            lock (_sinks)
            {
                foreach (var h in _sinks.Values)
                {
                    h.Free();
                    Interlocked.Decrement(ref LiveCount.Sinks);
                }
                _sinks.Clear();
            }
        }
    }
}
