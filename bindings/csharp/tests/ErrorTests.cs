using System;

namespace Vegas.Tests
{
    public static class ErrorTests
    {
        public static void TestErrorsCarryStatusAndMessage()
        {
            VegasException e = Assert.Throws<VegasException>(() => Model.Load("/nonexistent/model-dir"), "missing dir");
            Assert.Equal(Status.IO, e.Status, "status");
            Assert.True(e.LibraryMessage.Contains("/nonexistent/model-dir"), "message: " + e.LibraryMessage);
            Assert.True(e.Message.Contains("VEGAS_ERR_IO"), "exception message: " + e.Message);

            Tokenizer tok = Env.Model.Tokenizer;
            e = Assert.Throws<VegasException>(() => tok.Detokenize(new[] { 1 << 30 }), "out-of-range id");
            Assert.Equal(Status.TokenOutOfRange, e.Status, "status");
            Assert.True(e.LibraryMessage.Length > 0, "empty message");
            Assert.Equal(Status.NotFound, Assert.Throws<VegasException>(() => tok.TokenId("<|no such token|>"), "unknown name").Status, "status");

            using (Session s = Env.Model.CreateSession())
            {
                e = Assert.Throws<VegasException>(() => s.Submit(new Request()), "empty prompt");
                Assert.Equal(Status.InvalidArgument, e.Status, "status");
                Assert.True(e.LibraryMessage.Length > 0, "empty message");
                Assert.Equal(Status.InvalidArgument, Assert.Throws<VegasException>(() =>
                    s.Submit(new Request { Prompt = new[] { 1 }, StopStrings = new[] { "a\0b" } }), "NUL").Status, "status");
                Assert.Equal(Status.NotFound, Assert.Throws<VegasException>(() => s.GetSequenceInfo(12345), "unknown seq").Status, "status");

                // Inside a token callback the session cannot be stepped: WrongState.
                VegasException inner = null;
                s.Submit(new Request
                {
                    Prompt = tok.Tokenize(GenerateTests.CodePrompt), MaxTokens = 2,
                    OnToken = t =>
                    {
                        try { s.Step(); } catch (VegasException x) { inner = x; }
                        return false;
                    },
                });
                s.Run();
                Assert.True(inner != null && inner.Status == Status.WrongState, "Step inside a callback: " + inner);
            }
            var bad = new SessionOptions { Mode = DecodeMode.Vegas, Policy = "no-such-policy" };
            e = Assert.Throws<VegasException>(() => Env.Model.CreateSession(bad), "unknown policy");
            Assert.True(e.LibraryMessage.Contains("no-such-policy"), "message: " + e.LibraryMessage);
        }

        // An exception in a token callback stops the sequence and comes out of Run.
        public static void TestCallbackExceptionIsRethrown()
        {
            using (Session s = Env.Model.CreateSession())
            {
                int seq = s.Submit(new Request
                {
                    Prompt = Env.Model.Tokenizer.Tokenize(GenerateTests.CodePrompt), MaxTokens = 8,
                    OnToken = t => { throw new InvalidOperationException("boom"); },
                });
                var e = Assert.Throws<InvalidOperationException>(() => s.Run(), "callback exception");
                Assert.Equal("boom", e.Message, "message");
                Assert.Equal(FinishReason.Callback, s.GetSequenceInfo(seq).FinishReason, "finish reason");
            }
        }
    }
}
