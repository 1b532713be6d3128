// What the tests need from ctest's environment, and the C CLI as the reference.
using System;
using System.Diagnostics;
using System.IO;
using System.Text.RegularExpressions;

namespace Vegas.Tests
{
    internal static class Env
    {
        public static string ModelDir
        {
            get
            {
                string d = Environment.GetEnvironmentVariable("VEGAS_MODEL_DIR");
                return string.IsNullOrEmpty(d) ? Path.Combine("..", "..", "models", "vegas-code-22m") : d;
            }
        }

        private static Model _model;

        // One model shared by the tests that do not test lifetimes; freed at the end.
        public static Model Model
        {
            get { return _model ?? (_model = Model.Load(ModelDir, new ModelOptions { Backend = Backend.Cpu })); }
        }

        public static void DisposeModel()
        {
            if (_model != null) _model.Dispose();
            _model = null;
        }

        private static string Required(string name)
        {
            string v = Environment.GetEnvironmentVariable(name);
            if (string.IsNullOrEmpty(v)) throw new AssertionException(name + " is not set (ctest sets it)");
            return v;
        }

        // Runs a program and returns its standard output; fails on a non-zero exit.
        public static string Run(string program, string arguments)
        {
            var psi = new ProcessStartInfo(program, arguments)
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
            };
            using (Process p = Process.Start(psi))
            {
                string output = p.StandardOutput.ReadToEnd();
                p.WaitForExit();
                Assert.Equal(0, p.ExitCode, program + " " + arguments + ": exit code");
                return output;
            }
        }

        private static string Quote(string s)
        {
            return "\"" + s.Replace("\\", "\\\\").Replace("\"", "\\\"") + "\"";
        }

        private static int[] JsonInts(string json, string key)
        {
            Match m = Regex.Match(json, "\"" + key + "\":\\[([0-9,]*)\\]");
            Assert.True(m.Success, "no \"" + key + "\" array in " + json);
            string body = m.Groups[1].Value;
            if (body.Length == 0) return new int[0];
            return Array.ConvertAll(body.Split(','), int.Parse);
        }

        // `vegas generate --json`, greedy on the CPU: the reference tokens.
        public static int[] CliGenerate(string prompt, int maxTokens)
        {
            string json = Run(Required("VEGAS_CLI"), "generate --backend cpu --json --ignore-eos --model " +
                Quote(ModelDir) + " --max-tokens " + maxTokens + " --prompt " + Quote(prompt));
            return JsonInts(json, "tokens");
        }

        // `vegas tokenize --json`.
        public static int[] CliTokenize(string text)
        {
            string json = Run(Required("VEGAS_CLI"), "tokenize --json --model " + Quote(ModelDir) + " --text " + Quote(text));
            return JsonInts(json, "ids");
        }

        // tests/layout_dump: sizeof/offsetof of the C structs.
        public static string[] LayoutDump()
        {
            return Run(Required("VEGAS_LAYOUT_DUMP"), "").Split(new[] { '\n' }, StringSplitOptions.RemoveEmptyEntries);
        }
    }
}
