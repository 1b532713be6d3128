using System;
using System.Threading;

namespace Vegas.Tests
{
    public static class LifetimeTests
    {
        private static Model Load() { return Model.Load(Env.ModelDir, new ModelOptions { Backend = Backend.Cpu }); }

        // Disposing in any order: a session and a detokenizer keep what they need.
        public static void TestDisposeInAnyOrder()
        {
            foreach (string order in new[] { "model-first", "session-first", "detok-first" })
            {
                Model m = Load();
                Session s = m.CreateSession();
                Tokenizer tok = m.Tokenizer;
                Detokenizer d = tok.CreateDetokenizer();
                int[] ids = tok.Tokenize(GenerateTests.CodePrompt);
                switch (order)
                {
                    case "model-first":
                        m.Dispose();
                        int seq = s.Submit(new Request { Prompt = ids, MaxTokens = 4 });
                        s.Run();
                        Assert.Equal(4, s.GetTokens(seq).Length, "tokens after the model was disposed");
                        Assert.True(d.Push(ids[0]).Length > 0, "detokenizer after the model was disposed");
                        Assert.Throws<ObjectDisposedException>(() => tok.Tokenize("x"), "tokenizer of a disposed model");
                        Assert.Throws<ObjectDisposedException>(() => m.CreateSession(), "session of a disposed model");
                        s.Dispose();
                        d.Dispose();
                        break;
                    case "session-first":
                        s.Dispose();
                        d.Dispose();
                        m.Dispose();
                        break;
                    default:
                        d.Dispose();
                        m.Dispose();
                        s.Dispose();
                        break;
                }
                Assert.Throws<ObjectDisposedException>(() => s.Submit(new Request { Prompt = ids }), order + ": disposed session");
                Assert.Throws<ObjectDisposedException>(() => d.Push(1), order + ": disposed detokenizer");
                Assert.Throws<ObjectDisposedException>(() => { var i = m.Info; }, order + ": disposed model");
                m.Dispose();
                s.Dispose();
                d.Dispose();
            }
        }

        // Objects dropped without Dispose are freed by their finalizers, whatever
        // the order the GC picks.
        public static void TestDroppedObjectsAreFinalized()
        {
            long objects = Interlocked.Read(ref LiveCount.Objects), sinks = Interlocked.Read(ref LiveCount.Sinks);
            // On a thread of its own: Mono scans stacks conservatively, and a stale
            // slot of this frame could keep a dropped object reachable.
            var t = new Thread(DropSome);
            t.Start();
            t.Join();
            // model, its tokenizer, a session, a detokenizer, a loaded tokenizer
            Assert.Equal(objects + 5, Interlocked.Read(ref LiveCount.Objects), "objects made");
            Assert.Equal(sinks + 1, Interlocked.Read(ref LiveCount.Sinks), "callbacks held");
            WaitFreed(objects, sinks);
        }

        private static void DropSome()
        {
            Model m = Load();
            Session s = m.CreateSession();
            int[] ids = m.Tokenizer.Tokenize(GenerateTests.CodePrompt);
            s.Submit(new Request { Prompt = ids, MaxTokens = 2, OnToken = t => false });
            s.Run();
            Detokenizer d = m.Tokenizer.CreateDetokenizer(true);
            d.Push(ids[0]);
            Tokenizer t2 = Tokenizer.Load(Env.ModelDir);
            Assert.True(t2.VocabSize > 0, "vocab");
        }

        // Dispose from inside a callback and from another thread while Run is in
        // native code: the run ends, nothing is freed under it.
        public static void TestDisposeWhileRunning()
        {
            Model m = Env.Model;
            int[] ids = m.Tokenizer.Tokenize(GenerateTests.CodePrompt);
            Session s = m.CreateSession();
            int seq = s.Submit(new Request
            {
                Prompt = ids, MaxTokens = 50, IgnoreEos = true,
                OnToken = t =>
                {
                    Assert.True(s.GetTokens(t.Sequence).Length > 0, "tokens inside the callback");
                    s.Dispose(); // released when Run returns
                    return false;
                },
            });
            s.Run();
            Assert.Throws<ObjectDisposedException>(() => s.GetSequenceInfo(seq), "session disposed in its callback");

            Session s2 = m.CreateSession();
            s2.Submit(new Request { Prompt = ids, MaxTokens = 3000, IgnoreEos = true });
            Exception runError = null;
            var runner = new Thread(() =>
            {
                try { s2.Run(); } catch (Exception e) { runError = e; }
            });
            runner.Start();
            Thread.Sleep(100);
            s2.Dispose();
            Assert.True(runner.Join(30000), "the run did not end after Dispose");
            Assert.True(runError == null || runError is ObjectDisposedException, "run: " + runError);
        }

        // Many threads tokenize while the model is disposed under them.
        public static void TestConcurrentUseAndDispose()
        {
            Model m = Load();
            Tokenizer tok = m.Tokenizer;
            Exception failure = null;
            var threads = new Thread[8];
            for (int i = 0; i < threads.Length; i++)
            {
                threads[i] = new Thread(() =>
                {
                    try
                    {
                        for (int j = 0; j < 200; j++) tok.Tokenize("def f(x):\n    return x");
                    }
                    catch (ObjectDisposedException)
                    {
                    }
                    catch (Exception e)
                    {
                        failure = e;
                    }
                });
                threads[i].Start();
            }
            m.Dispose();
            foreach (Thread t in threads) t.Join();
            Assert.True(failure == null, "tokenize under a dispose: " + failure);
        }

        internal static void WaitFreed(long objects, long sinks)
        {
            for (int i = 0; i < 50; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
                if (Interlocked.Read(ref LiveCount.Objects) <= objects && Interlocked.Read(ref LiveCount.Sinks) <= sinks) return;
                Thread.Sleep(20);
            }
            throw new AssertionException(LiveCount.Objects + " native objects and " + LiveCount.Sinks +
                " callback handles alive, want " + objects + " and " + sinks);
        }

        // After every test (TestRunner): nothing may be left.
        internal static void AssertAllFreed()
        {
            Env.DisposeModel();
            WaitFreed(0, 0);
        }
    }
}
