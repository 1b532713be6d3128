// Status codes and the exception that carries them.
using System;
using System.Runtime.InteropServices;

namespace Vegas
{
    /// <summary>A vegas_status: 0 is success, errors are negative.</summary>
    public enum Status
    {
        Ok = 0,
        InvalidArgument = -1,
        StructSize = -2,
        IO = -3,
        Format = -4,
        Unsupported = -5,
        OutOfMemory = -6,
        KVFull = -7,
        TokenOutOfRange = -8,
        BufferTooSmall = -9,
        Cancelled = -10,
        Backend = -11,
        NotBuilt = -12,
        NotFound = -13,
        WrongState = -14,
        Internal = -99,
    }

    /// <summary>A failed libvegas call: the status and the library's message.</summary>
    public class VegasException : Exception
    {
        public Status Status { get; private set; }
        /// <summary>The C function that failed, e.g. "vegas_model_load".</summary>
        public string Function { get; private set; }
        /// <summary>vegas_last_error() of the failed call.</summary>
        public string LibraryMessage { get; private set; }

        public VegasException(string function, Status status, string libraryMessage)
            : base(function + ": " + Library.StatusName(status) + ": " + libraryMessage)
        {
            Function = function;
            Status = status;
            LibraryMessage = libraryMessage;
        }
    }

    /// <summary>Library-wide functions.</summary>
    public static class Library
    {
        /// <summary>The vegas.h version these bindings mirror.</summary>
        public const uint HeaderVersionNumber = 100; // 0 * 10000 + 1 * 100 + 0

        /// <summary>The library's version, "MAJOR.MINOR.PATCH".</summary>
        public static string Version { get { return Utf8.FromNative(Native.vegas_version()); } }

        /// <summary>major * 10000 + minor * 100 + patch of the loaded library.</summary>
        public static uint VersionNumber { get { return Native.vegas_version_number(); } }

        /// <summary>The library's name of a status, e.g. "VEGAS_ERR_KV_FULL".</summary>
        public static string StatusName(Status status) { return Utf8.FromNative(Native.vegas_status_name(status)); }

        // Throws for a failed status. The message is read right away, on the calling
        // thread: vegas_last_error is thread-local.
        internal static void Check(Status status, string function)
        {
            if (status != Status.Ok)
                throw new VegasException(function, status, Utf8.FromNative(Native.vegas_last_error()));
        }

        internal static VegasException Error(string function, Status status, string message)
        {
            return new VegasException(function, status, message);
        }
    }
}
