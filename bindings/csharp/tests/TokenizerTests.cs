using System;
using System.Text;

namespace Vegas.Tests
{
    public static class TokenizerTests
    {
        private const string CodeText = "def f(x):\n    return x  # é 你好<|endoftext|>";

        public static void TestModelInfoAndVersion()
        {
            ModelInfo info = Env.Model.Info;
            Assert.Equal(Backend.Cpu, info.Backend, "backend");
            Assert.True(info.Layers > 0 && info.KVBytesPerToken > 0 && info.Architecture.Length > 0,
                "implausible info: " + info.Architecture + ", " + info.Layers + " layers");
            Assert.True(Env.Model.Tokenizer.VocabSize > 0, "vocab size");
            Assert.Equal(Library.HeaderVersionNumber, Library.VersionNumber, "library version number");
            Assert.True(Library.Version.Length > 0, "version string");
        }

        public static void TestTokenizeMatchesCliAndRoundTrips()
        {
            Tokenizer tok = Env.Model.Tokenizer;
            int[] ids = tok.Tokenize(CodeText);
            Assert.Ids(Env.CliTokenize(CodeText), ids, "ids vs the CLI");
            Assert.Equal(CodeText, tok.Detokenize(ids), "round trip");
            Assert.Equal(CodeText.Replace("<|endoftext|>", ""), tok.Detokenize(ids, skipSpecial: true), "skip special");
            Assert.True(tok.IsSpecial(ids[ids.Length - 1]), "<|endoftext|> is special");
            foreach (int id in tok.Tokenize(CodeText, parseSpecial: false))
                Assert.True(!tok.IsSpecial(id), "special id " + id + " without special parsing");
            Assert.Equal(0, tok.Tokenize("").Length, "empty text");
        }

        public static void TestTokenQueries()
        {
            Tokenizer tok = Env.Model.Tokenizer;
            int eos = tok.TokenId("<|endoftext|>");
            Assert.Equal(eos, tok.SpecialTokens.Eos, "eos");
            Assert.Equal("<|endoftext|>", Encoding.UTF8.GetString(tok.TokenPiece(eos)), "piece");
        }

        public static void TestDetokenizerStreamsWholeCharacters()
        {
            Tokenizer tok = Env.Model.Tokenizer;
            const string text = "x = '你好 é ✓'\n";
            var sb = new StringBuilder();
            using (Detokenizer d = tok.CreateDetokenizer())
            {
                foreach (int id in tok.Tokenize(text))
                {
                    string piece = d.Push(id);
                    Assert.True(piece.IndexOf('\uFFFD') < 0, "broken character in " + piece);
                    sb.Append(piece);
                }
                sb.Append(d.Flush());
            }
            Assert.Equal(text, sb.ToString(), "streamed text");
        }

        public static void TestLoadTokenizerAgreesWithModel()
        {
            using (Tokenizer tok = Tokenizer.Load(Env.ModelDir))
                Assert.Ids(Env.Model.Tokenizer.Tokenize(CodeText), tok.Tokenize(CodeText), "loaded vs model tokenizer");
        }
    }
}
