// The (buf, capacity, needed) convention of vegas.h: call with a guess, and once
// more with the size the library asked for.
using System;

namespace Vegas
{
    internal static class Buffers
    {
        internal delegate Status Fill<T>(T[] buffer, UIntPtr capacity, out UIntPtr needed);

        internal static T[] Call<T>(string function, int guess, Fill<T> fill)
        {
            var buffer = new T[Math.Max(guess, 1)];
            while (true)
            {
                UIntPtr n;
                Status s = fill(buffer, (UIntPtr)(ulong)buffer.Length, out n);
                long needed = checked((long)n.ToUInt64());
                if (s == Status.BufferTooSmall && needed > buffer.Length)
                {
                    buffer = new T[needed];
                    continue;
                }
                Library.Check(s, function);
                Array.Resize(ref buffer, (int)needed);
                return buffer;
            }
        }
    }
}
