// A NUnit-free test runner: every public static void method of the test classes
// named Test* runs once; the exit code is the number of failures (0 = success).
using System;
using System.Collections.Generic;
using System.Reflection;

namespace Vegas.Tests
{
    internal sealed class AssertionException : Exception
    {
        public AssertionException(string message) : base(message) { }
    }

    internal static class Assert
    {
        public static void True(bool condition, string message)
        {
            if (!condition) throw new AssertionException(message);
        }

        public static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertionException(what + ": expected <" + expected + ">, got <" + actual + ">");
        }

        public static void Ids(int[] expected, int[] actual, string what)
        {
            Equal(string.Join(",", expected), string.Join(",", actual), what);
        }

        public static TException Throws<TException>(Action action, string what) where TException : Exception
        {
            try
            {
                action();
            }
            catch (TException e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertionException(what + ": expected " + typeof(TException).Name + ", got " + e);
            }
            throw new AssertionException(what + ": expected " + typeof(TException).Name + ", nothing was thrown");
        }
    }

    internal static class TestRunner
    {
        private static int Main(string[] args)
        {
            int failures = 0, passed = 0;
            foreach (Type type in typeof(TestRunner).Assembly.GetTypes())
            {
                if (type.Namespace != "Vegas.Tests" || !type.Name.EndsWith("Tests")) continue;
                foreach (MethodInfo m in type.GetMethods(BindingFlags.Public | BindingFlags.Static))
                {
                    if (!m.Name.StartsWith("Test")) continue;
                    if (args.Length > 0 && Array.IndexOf(args, m.Name) < 0) continue;
                    var watch = System.Diagnostics.Stopwatch.StartNew();
                    try
                    {
                        m.Invoke(null, null);
                        passed++;
                        Console.WriteLine("PASS {0}.{1} ({2} ms)", type.Name, m.Name, watch.ElapsedMilliseconds);
                    }
                    catch (TargetInvocationException e)
                    {
                        failures++;
                        Console.WriteLine("FAIL {0}.{1}: {2}", type.Name, m.Name, e.InnerException);
                    }
                }
            }
            // Everything the tests made and dropped must be freed by now.
            try
            {
                LifetimeTests.AssertAllFreed();
            }
            catch (Exception e)
            {
                failures++;
                Console.WriteLine("FAIL leak check: " + e.Message);
            }
            Console.WriteLine("{0} passed, {1} failed", passed, failures);
            return failures == 0 ? 0 : 1;
        }
    }
}
