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
                Assert.Equal(expected, actual, parts[0] + " " + parts[1]);
                checkedLines++;
            }
            Assert.True(checkedLines > 80, "only " + checkedLines + " layout lines");
        }
    }
}
