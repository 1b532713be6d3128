// Every mirrored struct has the C size and field offsets (tests/layout_dump.c).
using System;
using System.Runtime.InteropServices;

namespace Vegas.Tests
{
    public static class LayoutTests
    {
        public static void TestStructLayoutsMatchC()
        {
            int checkedLines = 0;
            foreach (string line in Env.LayoutDump())
            {
                string[] parts = line.Split(' ');
                Type t = typeof(Native).GetNestedType(parts[0], System.Reflection.BindingFlags.NonPublic);
                Assert.True(t != null, "Native has no struct " + parts[0]);
                long expected = long.Parse(parts[2]);
                long actual = parts[1] == "size" ? Marshal.SizeOf(t) : Marshal.OffsetOf(t, parts[1]).ToInt64();
                Assert.Equal(expected, actual, parts[0] + " " + parts[1] +
                    (parts[1] == "size" ? " (vegas.h grew? mirror the new fields in src/Native.cs)" : ""));
                checkedLines++;
            }
            Assert.True(checkedLines > 80, "only " + checkedLines + " layout lines");
        }

        // init_sized is told the mirror's size; called with an older, smaller size it
        // writes only that many bytes (the canary after them survives).
        public static void TestInitIsSizedToTheMirror()
        {
            Native.vegas_tokenize_options real;
            Native.vegas_tokenize_options_init(out real);
            Assert.Equal((uint)Marshal.SizeOf(typeof(Native.vegas_tokenize_options)), real.struct_size, "struct_size");
            Assert.Equal(1, real.parse_special, "default parse_special");
            Assert.Equal(1, real.add_special, "default add_special");
            const int older = 8, canary = 64;
            IntPtr p = Marshal.AllocHGlobal(older + canary);
            try
            {
                for (int i = 0; i < older + canary; i++) Marshal.WriteByte(p, i, 0xA5);
                Native.vegas_tokenize_options_init_sized(p, (UIntPtr)older);
                Assert.Equal(older, Marshal.ReadInt32(p, 0), "struct_size of the older struct");
                Assert.Equal(1, Marshal.ReadInt32(p, 4), "parse_special of the older struct");
                for (int i = older; i < older + canary; i++)
                    Assert.Equal(0xA5, (int)Marshal.ReadByte(p, i), "canary byte " + i);
            }
            finally
            {
                Marshal.FreeHGlobal(p);
            }
        }
    }
}
