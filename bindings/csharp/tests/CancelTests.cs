using System;
using System.Collections.Generic;
using System.Threading;

namespace Vegas.Tests
{
    public static class CancelTests
    {
        private const string Prompt = GenerateTests.CodePrompt;

        // Cancelling from inside the stream stops it with OperationCanceledException.
        public static void TestStreamCancellation()
        {
            var cts = new CancellationTokenSource();
            var pieces = new List<string>();
            Assert.Throws<OperationCanceledException>(() =>
            {
                foreach (string piece in Env.Model.Stream(Prompt, new GenerateOptions { MaxTokens = 200, IgnoreEos = true }, cts.Token))
                {
                    pieces.Add(piece);
                    if (pieces.Count == 3) cts.Cancel();
                }
            }, "cancelled stream");
            Assert.True(pieces.Count >= 3 && pieces.Count <= 6, pieces.Count + " pieces after the cancel");
        }

        // A timer cancels from another thread while Generate is inside native code.
        public static void TestGenerateCancelledFromAnotherThread()
        {
            var cts = new CancellationTokenSource(150);
            var watch = System.Diagnostics.Stopwatch.StartNew();
            Assert.Throws<OperationCanceledException>(() =>
                Env.Model.Generate(Prompt, new GenerateOptions { MaxTokens = 4000, IgnoreEos = true }, cts.Token),
                "cancelled generate");
            Assert.True(watch.ElapsedMilliseconds < 20000, "cancel took " + watch.ElapsedMilliseconds + " ms");
        }

        // Leaving a stream early cancels the generation and frees its session.
        public static void TestStreamBreakFreesSession()
        {
            long before = Interlocked.Read(ref LiveCount.Objects);
            foreach (string piece in Env.Model.Stream(Prompt, new GenerateOptions { MaxTokens = 500, IgnoreEos = true }))
                break;
            Assert.Equal(before, Interlocked.Read(ref LiveCount.Objects), "live objects after the break");
        }

        // Session.Cancel of one sequence from another thread, and a callback that
        // returns false, each stop only their own sequence.
        public static void TestCancelOneSequence()
        {
            Model m = Env.Model;
            int[] ids = m.Tokenizer.Tokenize(Prompt);
            using (Session s = m.CreateSession())
            using (var started = new ManualResetEventSlim())
            {
                int longSeq = s.Submit(new Request { Prompt = ids, MaxTokens = 2000, IgnoreEos = true, OnToken = t => { started.Set(); return false; } });
                int stopped = s.Submit(new Request { Prompt = ids, MaxTokens = 50, IgnoreEos = true, OnToken = t => true }); // stops
                int shortSeq = s.Submit(new Request { Prompt = ids, MaxTokens = 5, IgnoreEos = true });
                var canceller = new Thread(() =>
                {
                    started.Wait();
                    Thread.Sleep(50);
                    s.Cancel(longSeq);
                });
                canceller.Start();
                s.Run();
                canceller.Join();
                Assert.Equal(FinishReason.Cancelled, s.GetSequenceInfo(longSeq).FinishReason, "cancelled sequence");
                Assert.Equal(FinishReason.Callback, s.GetSequenceInfo(stopped).FinishReason, "stopped by callback");
                Assert.Equal(1, s.GetSequenceInfo(stopped).GeneratedTokens, "tokens before the callback stopped it");
                Assert.Equal(FinishReason.Length, s.GetSequenceInfo(shortSeq).FinishReason, "untouched sequence");
            }
        }

        public static void TestLoadWithCancelledToken()
        {
            var cts = new CancellationTokenSource();
            cts.Cancel();
            Assert.Throws<OperationCanceledException>(() => Model.Load(Env.ModelDir, null, cts.Token), "cancelled load");
            Assert.Throws<OperationCanceledException>(() => Env.Model.Generate(Prompt, null, cts.Token), "cancelled generate");
        }
    }
}
