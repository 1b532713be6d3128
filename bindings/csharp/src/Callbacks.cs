// Native callbacks: static trampolines (IL2CPP cannot marshal instance delegates)
// that find their target through a GCHandle passed as user_data.
using System;
using System.Runtime.InteropServices;

namespace Vegas
{
    /// <summary>
    /// Marks a static method that native code calls back. Unity's IL2CPP looks for
    /// an attribute of this name (in any namespace) to generate the reverse
    /// P/Invoke wrapper; Mono and .NET ignore it.
    /// </summary>
    [AttributeUsage(AttributeTargets.Method)]
    internal sealed class MonoPInvokeCallbackAttribute : Attribute
    {
        public MonoPInvokeCallbackAttribute(Type delegateType) { DelegateType = delegateType; }
        public Type DelegateType { get; private set; }
    }

    /// <summary>One committed token of a sequence, as a token callback sees it.</summary>
    public struct Token
    {
        public Token(int sequence, int id, string piece)
        {
            Sequence = sequence;
            Id = id;
            Piece = piece;
        }

        /// <summary>The sequence, as Session.Submit returned it.</summary>
        public int Sequence { get; private set; }
        /// <summary>The token id.</summary>
        public int Id { get; private set; }
        /// <summary>The text that became final with this token (may be empty).</summary>
        public string Piece { get; private set; }
    }

    // The target of a request's token callback. It must not refer to its Session
    // (the GCHandle is a root: the session could never be collected).
    internal sealed class TokenSink
    {
        internal readonly Func<Token, bool> Fn;
        internal Exception Error; // thrown by Fn; rethrown on the thread that stepped

        internal TokenSink(Func<Token, bool> fn) { Fn = fn; }
    }

    internal sealed class ProgressSink
    {
        internal readonly Func<float, bool> Fn;
        internal Exception Error;

        internal ProgressSink(Func<float, bool> fn) { Fn = fn; }
    }

    internal static class Trampolines
    {
        // Kept in static fields so the delegates (and their native thunks) live forever.
        private static readonly Native.TokenFn TokenDelegate = OnToken;
        private static readonly Native.ProgressFn ProgressDelegate = OnProgress;
        internal static readonly IntPtr Token = Marshal.GetFunctionPointerForDelegate(TokenDelegate);
        internal static readonly IntPtr Progress = Marshal.GetFunctionPointerForDelegate(ProgressDelegate);

        [MonoPInvokeCallback(typeof(Native.TokenFn))]
        private static int OnToken(int seq, int token, IntPtr piece, UIntPtr pieceLen, IntPtr userData)
        {
            // No exception may unwind into native code: keep it for later.
            var sink = GCHandle.FromIntPtr(userData).Target as TokenSink;
            if (sink == null || sink.Error != null) return 1;
            try
            {
                return sink.Fn(new Token(seq, token, Utf8.FromNative(piece, checked((int)pieceLen.ToUInt64())))) ? 1 : 0;
            }
            catch (Exception e)
            {
                sink.Error = e;
                return 1;
            }
        }

        [MonoPInvokeCallback(typeof(Native.ProgressFn))]
        private static int OnProgress(float progress, IntPtr userData)
        {
            var sink = GCHandle.FromIntPtr(userData).Target as ProgressSink;
            if (sink == null || sink.Error != null) return 1;
            try
            {
                return sink.Fn(progress) ? 0 : 1;
            }
            catch (Exception e)
            {
                sink.Error = e;
                return 1;
            }
        }
    }
}
