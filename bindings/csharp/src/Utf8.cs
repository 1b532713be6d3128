// UTF-8 in both directions: libvegas speaks UTF-8 everywhere, whatever the
// platform's default string marshalling is.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Vegas
{
    internal static class Utf8
    {
        // A NUL-terminated copy of s; a NUL inside s would cut it short, so it is an error.
        internal static byte[] Z(string s, string function, string what)
        {
            if (s == null) throw Library.Error(function, Status.InvalidArgument, what + " is null");
            if (s.IndexOf('\0') >= 0) throw Library.Error(function, Status.InvalidArgument, what + " contains a NUL character");
            byte[] bytes = new byte[Encoding.UTF8.GetByteCount(s) + 1];
            Encoding.UTF8.GetBytes(s, 0, s.Length, bytes, 0);
            return bytes;
        }

        // A NUL-terminated string owned by the library.
        internal static string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            return FromNative(p, n);
        }

        internal static string FromNative(IntPtr p, int n)
        {
            if (n == 0) return "";
            byte[] bytes = new byte[n];
            Marshal.Copy(p, bytes, 0, n);
            return Encoding.UTF8.GetString(bytes);
        }

        // Copies s into unmanaged memory (freed by the caller with Marshal.FreeHGlobal).
        internal static IntPtr ToHGlobal(byte[] z)
        {
            IntPtr p = Marshal.AllocHGlobal(z.Length);
            Marshal.Copy(z, 0, p, z.Length);
            return p;
        }
    }
}
