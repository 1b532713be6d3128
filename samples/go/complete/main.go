// Command complete streams a completion of a code prompt with the embedded
// model through the Go binding. Ctrl-C cancels the generation cleanly.
//
// From the repository root, after the README's build (samples/go is its own
// module, so the command runs there):
//
//	(root=$PWD; cd samples/go && CGO_CFLAGS="-I$root/include" \
//	  CGO_LDFLAGS="-L$root/build/lib -Wl,-rpath,$root/build/lib" \
//	  go run ./complete -model "$root/models/vegas-code-22m" -prompt 'def quicksort(xs):')
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"libvegas.dev/vegas"
)

func main() {
	modelDir := flag.String("model", "models/vegas-code-22m", "Hugging Face model directory")
	prompt := flag.String("prompt", "def quicksort(xs):\n", "code to complete")
	maxTokens := flag.Int("max-tokens", 64, "tokens to generate")
	flag.Parse()

	model, err := vegas.LoadModel(*modelDir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer model.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Print(*prompt)
	c, err := model.Generate(ctx, *prompt, &vegas.GenerateOptions{
		MaxTokens: int32(*maxTokens),
		OnPiece:   func(piece string) bool { fmt.Print(piece); return false },
	})
	fmt.Println()
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "[cancelled]")
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	default:
		fmt.Fprintf(os.Stderr, "[%d tokens, finished by %v]\n", c.Info.Generated, c.Info.Finish)
	}
}
