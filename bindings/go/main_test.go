package vegas

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// The embedded model: $VEGAS_MODEL_DIR (set by ctest) or the repository's copy.
func modelDir() string {
	if d := os.Getenv("VEGAS_MODEL_DIR"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "models", "vegas-code-22m")
}

var (
	sharedOnce  sync.Once
	sharedModel *Model
	sharedErr   error
)

// model is one model shared by the tests (TestMain closes it).
func model(t *testing.T) *Model {
	t.Helper()
	sharedOnce.Do(func() { sharedModel, sharedErr = LoadModel(modelDir(), &ModelOptions{Backend: BackendCPU}) })
	if sharedErr != nil {
		t.Fatalf("loading %s: %v", modelDir(), sharedErr)
	}
	return sharedModel
}

// TestMain checks, after every test, that the package freed every C object and
// cgo.Handle it made: what tests closed, and what they dropped (finalizers).
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedModel != nil {
		sharedModel.Close()
	}
	if code == 0 {
		if err := waitFreed(); err != nil {
			fmt.Fprintln(os.Stderr, "leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitFreed runs the GC until the finalizers have freed everything, or fails.
func waitFreed() error { return waitLive(0, 0) }

// waitLive runs the GC until no more than the given numbers of C objects and
// cgo handles are alive, or fails.
func waitLive(objects, handles int64) error {
	for i := 0; i < 50; i++ {
		runtime.GC()
		if liveObjects.Load() <= objects && liveHandles.Load() <= handles {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%d C objects and %d cgo handles still alive, want %d and %d",
		liveObjects.Load(), liveHandles.Load(), objects, handles)
}

// cliGenerate runs the C CLI (`vegas generate --json`) greedily on the CPU.
func cliGenerate(t *testing.T, prompt string, maxTokens int) (tokens []int32, text string) {
	t.Helper()
	cli := os.Getenv("VEGAS_CLI")
	if cli == "" {
		t.Skip("VEGAS_CLI is not set (ctest sets it to the built `vegas` CLI)")
	}
	out, err := exec.Command(cli, "generate", "--backend", "cpu", "--json", "--model", modelDir(),
		"--prompt", prompt, "--max-tokens", fmt.Sprint(maxTokens), "--ignore-eos").Output()
	if err != nil {
		t.Fatalf("%s generate: %v", cli, err)
	}
	var r struct {
		Tokens []int32 `json:"tokens"`
		Text   string  `json:"text"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("CLI output %q: %v", out, err)
	}
	return r.Tokens, r.Text
}

// cliTokenize runs `vegas tokenize --json`.
func cliTokenize(t *testing.T, text string) []int32 {
	t.Helper()
	cli := os.Getenv("VEGAS_CLI")
	if cli == "" {
		t.Skip("VEGAS_CLI is not set (ctest sets it to the built `vegas` CLI)")
	}
	out, err := exec.Command(cli, "tokenize", "--model", modelDir(), "--text", text, "--json").Output()
	if err != nil {
		t.Fatalf("%s tokenize: %v", cli, err)
	}
	var r struct {
		IDs []int32 `json:"ids"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("CLI output %q: %v", out, err)
	}
	return r.IDs
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
