// Streams a completion of a code prompt with the embedded model through the C#
// binding; Ctrl-C cancels the generation cleanly.
//
//   mcs -out:complete.exe -r:Vegas.dll samples/csharp/Complete.cs
//   LD_LIBRARY_PATH=build/lib mono complete.exe models/vegas-code-22m 'def quicksort(xs):'
using System;
using System.Threading;
using Vegas;

internal static class Complete
{
    private static int Main(string[] args)
    {
        string modelDir = args.Length > 0 ? args[0] : "models/vegas-code-22m";
        string prompt = args.Length > 1 ? args[1] : "def quicksort(xs):\n";
        int maxTokens = args.Length > 2 ? int.Parse(args[2]) : 64;

        using (var cts = new CancellationTokenSource())
        using (Model model = Model.Load(modelDir))
        {
            Console.CancelKeyPress += (sender, e) =>
            {
                e.Cancel = true; // end the stream, not the process
                cts.Cancel();
            };
            Console.Write(prompt);
            int pieces = 0;
            try
            {
                foreach (string piece in model.Stream(prompt, new GenerateOptions { MaxTokens = maxTokens }, cts.Token))
                {
                    Console.Write(piece);
                    pieces++;
                }
                Console.WriteLine();
                Console.Error.WriteLine("[{0} tokens]", pieces);
            }
            catch (OperationCanceledException)
            {
                Console.WriteLine();
                Console.Error.WriteLine("[cancelled]");
            }
            catch (VegasException e)
            {
                Console.Error.WriteLine(e.Message);
                return 1;
            }
        }
        return 0;
    }
}
