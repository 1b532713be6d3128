// What the public classes that own a handle hold: Dispose is final for the
// caller (every later call throws ObjectDisposedException, on Mono as on .NET,
// whose SafeHandles differ on that point while other handles still reference
// one), and the SafeHandle's reference count keeps the native object alive for
// calls in flight and for the objects that depend on it.
using System;
using System.Runtime.InteropServices;

namespace Vegas
{
    internal sealed class Owned<THandle> where THandle : SafeHandle
    {
        private readonly THandle _handle;
        private volatile bool _disposed;

        internal Owned(THandle handle) { _handle = handle; }

        // The handle for a call; throws once disposed.
        internal THandle Handle
        {
            get
            {
                if (_disposed) throw new ObjectDisposedException(typeof(THandle).Name.Replace("Handle", ""));
                return _handle;
            }
        }

        // The handle even after Dispose (for cancellation, which must not throw).
        internal THandle RawHandle { get { return _handle; } }

        internal void Dispose()
        {
            _disposed = true;
            _handle.Dispose();
        }
    }
}
