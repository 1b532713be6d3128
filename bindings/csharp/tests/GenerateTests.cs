using System;
using System.Collections.Generic;
using System.Linq;

namespace Vegas.Tests
{
    public static class GenerateTests
    {
        internal const string CodePrompt = "def fibonacci(n):\n";

        public static void TestGreedyMatchesCli()
        {
            int[] expected = Env.CliGenerate(CodePrompt, 24);
            Completion c = Env.Model.Generate(CodePrompt, new GenerateOptions { MaxTokens = 24, IgnoreEos = true });
            Assert.Ids(expected, c.Tokens, "tokens vs the CLI");
            Assert.Equal(Env.Model.Tokenizer.Detokenize(expected), c.Text, "text");
            Assert.Equal(FinishReason.Length, c.Info.FinishReason, "finish reason");
            Assert.Equal(24, c.Info.GeneratedTokens, "generated");
        }

        public static void TestStreamYieldsPiecesInOrder()
        {
            var options = new GenerateOptions { MaxTokens = 16, IgnoreEos = true };
            List<string> pieces = Env.Model.Stream(CodePrompt, options).ToList();
            Assert.Equal(16, pieces.Count, "pieces");
            Assert.Equal(Env.Model.Generate(CodePrompt, options).Text, string.Concat(pieces), "streamed text");
        }

        // Two sequences of one session: each callback sees its own tokens, in order,
        // and batched decoding interleaves them.
        public static void TestSessionCallbacksInOrder()
        {
            Model m = Env.Model;
            using (Session s = m.CreateSession())
            {
                var seen = new Dictionary<int, List<int>>();
                var order = new List<int>();
                Func<Token, bool> record = t =>
                {
                    if (!seen.ContainsKey(t.Sequence)) seen[t.Sequence] = new List<int>();
                    seen[t.Sequence].Add(t.Id);
                    order.Add(t.Sequence);
                    return false;
                };
                int a = s.Submit(new Request { Prompt = m.Tokenizer.Tokenize(CodePrompt), MaxTokens = 12, IgnoreEos = true, OnToken = record });
                int b = s.Submit(new Request { Prompt = m.Tokenizer.Tokenize("import os\n"), MaxTokens = 8, IgnoreEos = true, OnToken = record });
                while (s.Step() > 0) { }
                Assert.Ids(s.GetTokens(a), seen[a].ToArray(), "sequence a");
                Assert.Ids(s.GetTokens(b), seen[b].ToArray(), "sequence b");
                Assert.Equal(20, order.Count, "callbacks");
                Assert.True(order[0] != order[1], "the first round serves both sequences");
                Assert.Ids(m.Generate(CodePrompt, new GenerateOptions { MaxTokens = 12, IgnoreEos = true }).Tokens,
                    seen[a].ToArray(), "batched vs alone");
            }
        }

        // Session options reach the library: a prefill-first schedule and a Vegas
        // (speculative) session still give the greedy tokens of the default session.
        public static void TestSessionOptionsKeepGreedyOutput()
        {
            var plain = new GenerateOptions { MaxTokens = 12, IgnoreEos = true };
            int[] expected = Env.Model.Generate(CodePrompt, plain).Tokens;
            plain.Session = new SessionOptions { Mode = DecodeMode.Vegas, Schedule = Schedule.PrefillFirst };
            Completion c = Env.Model.Generate(CodePrompt, plain);
            Assert.Ids(expected, c.Tokens, "vegas + prefill-first vs default");
            Assert.True(c.Info.Rounds > 0, "no speculative rounds in Vegas mode");
        }

        public static void TestSamplingSeed()
        {
            Func<ulong, int[]> gen = seed => Env.Model.Generate("import numpy as np\n", new GenerateOptions
            {
                MaxTokens = 16,
                IgnoreEos = true,
                Sampling = new SamplingOptions { Temperature = 0.9f, TopP = 0.95f, Seed = seed },
            }).Tokens;
            int[] a = gen(1), b = gen(1), c = gen(2);
            Assert.Ids(a, b, "same seed");
            Assert.True(string.Join(",", a) != string.Join(",", c), "different seeds gave the same tokens");
        }

        public static void TestStopString()
        {
            var options = new GenerateOptions { MaxTokens = 24, IgnoreEos = true };
            string text = Env.Model.Generate(CodePrompt, options).Text;
            int i = text.IndexOfAny(new[] { '(', ':', '=' }, 1);
            Assert.True(i > 0, "no stop candidate in " + text);
            options.StopStrings = new[] { text.Substring(i, 1) };
            Completion c = Env.Model.Generate(CodePrompt, options);
            Assert.Equal(FinishReason.Stop, c.Info.FinishReason, "finish reason");
            Assert.Equal(text.Substring(0, text.IndexOf(text[i])), c.Text, "text before the stop string");
        }
    }
}
