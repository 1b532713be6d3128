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

        // A newer library whose init writes a struct 1 KiB larger than the mirror
        // (appended fields) writes into scratch memory, not past the binding's struct.
        public static void TestInitOfAGrownStructStaysInScratch()
        {
            Native.vegas_tokenize_options o = Native.Init<Native.vegas_tokenize_options>(p =>
            {
                for (int i = 0; i < 12 + 1024; i++) Marshal.WriteByte(p, i, 0x01);
            });
            Assert.Equal(0x01010101, o.add_special, "the binding's part of the struct");
            Native.vegas_tokenize_options real;
            Native.vegas_tokenize_options_init(out real);
            Assert.Equal((uint)Marshal.SizeOf(typeof(Native.vegas_tokenize_options)), real.struct_size, "struct_size");
            Assert.Equal(1, real.parse_special, "default parse_special");
        }
    }
}
