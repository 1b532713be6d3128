// IAsyncEnumerable streaming, where the compiler and framework have it (C# 8,
// .NET Core 3+ / .NET Standard 2.1; the .csproj defines VEGAS_ASYNC_STREAMS).
// Mono's mcs in Debian 12 does not: Model.Stream works everywhere.
#if VEGAS_ASYNC_STREAMS
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

namespace Vegas
{
    public sealed partial class Model
    {
        /// <summary>
        /// Streams the completion of prompt; each step runs on the thread pool, so
        /// the caller's thread (a UI or game loop) never blocks. Cancellation
        /// cancels the sequence and throws OperationCanceledException.
        /// </summary>
        public async IAsyncEnumerable<string> StreamAsync(string prompt, GenerateOptions options = null,
            [EnumeratorCancellation] CancellationToken cancellation = default)
        {
            options = options ?? new GenerateOptions();
            using (Session session = CreateSession(options.Session))
            {
                var pieces = new ConcurrentQueue<string>();
                int seq = session.Submit(MakeRequest(prompt, options, t => { pieces.Enqueue(t.Piece); return false; }));
                using (cancellation.Register(() => session.CancelIfOpen(seq)))
                {
                    while (true)
                    {
                        int active = await Task.Run(() => session.Step()).ConfigureAwait(false);
                        while (pieces.TryDequeue(out string piece)) yield return piece;
                        if (active == 0) break;
                    }
                }
                session.Finish(seq, cancellation);
            }
        }
    }
}
#endif
