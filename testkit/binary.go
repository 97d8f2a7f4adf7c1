package testkit

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// DairPackage is the import path of the dair binary's main package, which BuildBinary builds.
const DairPackage = "github.com/dairuntime/dair/cmd/dair"

// BuildBinary builds the dair binary into dir (as dir/dair) and returns its path, for
// ProcessClusterOptions.Binary. Call it once per test binary, typically from TestMain, with a
// directory the caller removes afterwards.
//
// It runs `go build` (the go command on PATH) in the current directory, so DairPackage resolves
// through the calling module, at the dair version that module requires. Inside the dair
// module that always works. A module of your own must require github.com/dairuntime/dair and
// list the binary as a tool, so that its go.sum covers the binary's dependencies:
//
//	go get -tool github.com/dairuntime/dair/cmd/dair
//
// It blocks until the build ends or ctx is done, and returns the go command's output with the
// error when the build fails.
func BuildBinary(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "dair")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, DairPackage).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("testkit: build %s: %w\n%s", DairPackage, err, out)
	}
	return bin, nil
}
