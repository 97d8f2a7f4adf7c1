// Command mutate checks that the tests can fail: it copies the module (the working tree,
// tracked and untracked files; the tree itself is never modified) into a temporary directory,
// applies each fault of faults.go to the copy in turn (restoring the file after each), runs the
// suite's tests outside internal/store on it, and fails unless every fault makes at least one
// test fail. It prints, per fault, the tests that caught it. The copy stays at one path for the
// whole check, so the build cache serves every package a fault does not touch.
//
// Usage (from the module root; `make mutate`):
//
//	go run ./internal/tools/mutate [-all] [-only name] [-timeout 5m]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	all := flag.Bool("all", false, "run every suite entry even after one caught the fault")
	only := flag.String("only", "", "run only the fault with this name")
	timeout := flag.Duration("timeout", 5*time.Minute, "go test -timeout of each run")
	flag.Parse()
	if err := run(*all, *only, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

// outcome is what the suite did with one fault.
type outcome struct {
	fault  string
	caught []string // "pkg TestName", leaf tests that failed
	err    error    // the check itself failed (anchor missing, build failure, ...)
	took   time.Duration
}

func run(all bool, only string, timeout time.Duration) error {
	root, err := gitOutput("", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	root = strings.TrimSpace(root)
	files, err := treeFiles(root)
	if err != nil {
		return err
	}
	// Every anchor is checked before anything runs, so a stale table fails at once.
	var selected []fault
	for _, f := range faults {
		if only != "" && f.name != only {
			continue
		}
		if _, err := patched(filepath.Join(root, f.file), f); err != nil {
			return fmt.Errorf("fault %s: %w", f.name, err)
		}
		selected = append(selected, f)
	}
	if len(selected) == 0 {
		return fmt.Errorf("no fault named %q", only)
	}
	start := time.Now()
	dir, err := os.MkdirTemp("", "dair-mutate-")
	if err != nil {
		return err
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, "mutate: remove copy:", err)
		}
	}()
	if err := copyFiles(root, dir, files); err != nil {
		return err
	}
	fmt.Printf("copied %d files to %s\n", len(files), dir)
	var results []outcome
	for _, f := range selected {
		fmt.Printf("== fault %s (%s)\n", f.name, f.file)
		o := check(dir, f, all, timeout)
		results = append(results, o)
		switch {
		case o.err != nil:
			fmt.Printf("   ERROR after %s: %v\n", o.took.Round(time.Second), o.err)
		case len(o.caught) == 0:
			fmt.Printf("   NOT CAUGHT after %s\n", o.took.Round(time.Second))
		default:
			fmt.Printf("   caught after %s by %s\n", o.took.Round(time.Second), strings.Join(o.caught, ", "))
		}
	}
	fmt.Printf("\nmutation check (%s):\n", time.Since(start).Round(time.Second))
	failed := 0
	for _, o := range results {
		verdict := "caught by " + strings.Join(o.caught, ", ")
		if o.err != nil {
			verdict, failed = "ERROR: "+o.err.Error(), failed+1
		} else if len(o.caught) == 0 {
			verdict, failed = "NOT CAUGHT", failed+1
		}
		fmt.Printf("  %-36s %s\n", o.fault, verdict)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d faults not caught by the tests outside internal/store", failed, len(results))
	}
	return nil
}

// check applies f to the copy in dir, runs the suite on it and restores the file.
func check(dir string, f fault, all bool, timeout time.Duration) (o outcome) {
	o.fault = f.name
	start := time.Now()
	defer func() { o.took = time.Since(start) }()
	target := filepath.Join(dir, f.file)
	orig, err := os.ReadFile(target)
	if err != nil {
		o.err = err
		return o
	}
	src, err := patched(target, f)
	if err != nil {
		o.err = err
		return o
	}
	if err := os.WriteFile(target, src, 0o644); err != nil {
		o.err = err
		return o
	}
	defer func() {
		if err := os.WriteFile(target, orig, 0o644); err != nil && o.err == nil {
			o.err = fmt.Errorf("restore %s: %w", f.file, err)
		}
	}()
	for _, r := range suite {
		failed, err := goTest(dir, r, timeout)
		if err != nil {
			o.err = err
			return o
		}
		for _, name := range failed {
			o.caught = append(o.caught, strings.TrimSuffix(strings.TrimPrefix(r.pkg, "./"), "/")+" "+name)
		}
		if len(o.caught) > 0 && !all {
			return o
		}
	}
	return o
}

// patched returns the content of path with f applied; the anchor must occur exactly once.
func patched(path string, f fault) ([]byte, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.file, err)
	}
	switch n := bytes.Count(src, []byte(f.old)); n {
	case 1:
		return bytes.Replace(src, []byte(f.old), []byte(f.new), 1), nil
	case 0:
		return nil, fmt.Errorf("anchor not found in %s (re-anchor the fault in internal/tools/mutate/faults.go): %q", f.file, f.old)
	default:
		return nil, fmt.Errorf("anchor found %d times in %s, want once: %q", n, f.file, f.old)
	}
}

// testEvent is one line of `go test -json`.
type testEvent struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// goTest runs one suite entry in dir and returns its failed leaf tests. A package that fails
// without a failing test (build failure, TestMain failure, timeout) or runs no test is an
// error: the mutant was not tested.
func goTest(dir string, r testRun, timeout time.Duration) ([]string, error) {
	cmd := exec.Command("go", "test", "-json", "-count=1", "-failfast", "-timeout", timeout.String(), "-run", r.run, r.pkg)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	res := newTestResults()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev testEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // not an event (build output on some Go versions)
		}
		res.add(ev)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	waitErr := cmd.Wait()
	var exit *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exit) {
		return nil, waitErr
	}
	if len(res.failed) == 0 {
		if res.pkgFailed || waitErr != nil {
			return nil, fmt.Errorf("%s failed without a failing test (build or setup failure):\n%s", r.pkg, tail(res.outputs[""]))
		}
		if res.ran == 0 {
			return nil, fmt.Errorf("%s: no test matches -run %q", r.pkg, r.run)
		}
		return nil, nil
	}
	return res.leaves(r.pkg), nil
}

// testResults collects the events of one `go test -json` run.
type testResults struct {
	ran         int
	failed      map[string]bool
	pkgFailed   bool
	outputs     map[string]*strings.Builder // by test, "" for the package
	failedOrder []string
}

func newTestResults() *testResults {
	return &testResults{failed: map[string]bool{}, outputs: map[string]*strings.Builder{}}
}

// add records one event.
func (t *testResults) add(ev testEvent) {
	switch ev.Action {
	case "run":
		t.ran++
	case "output":
		b := t.outputs[ev.Test]
		if b == nil {
			b = &strings.Builder{}
			t.outputs[ev.Test] = b
		}
		if b.Len() < 64<<10 {
			b.WriteString(ev.Output)
		}
	case "fail":
		if ev.Test == "" {
			t.pkgFailed = true
		} else if !t.failed[ev.Test] {
			t.failed[ev.Test] = true
			t.failedOrder = append(t.failedOrder, ev.Test)
		}
	}
}

// leaves returns the failed leaf tests, sorted, and prints the tail of each one's output: a
// failed test whose failed subtest is listed is implied.
func (t *testResults) leaves(pkg string) []string {
	var leaves []string
	for _, name := range t.failedOrder {
		leaf := true
		for other := range t.failed {
			if strings.HasPrefix(other, name+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			leaves = append(leaves, name)
			if b := t.outputs[name]; b != nil {
				fmt.Printf("   --- %s %s:\n%s", pkg, name, indent(tail(b)))
			}
		}
	}
	sort.Strings(leaves)
	return leaves
}

// tail returns the last lines of b.
func tail(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > 12 {
		lines = lines[len(lines)-12:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func indent(s string) string {
	return "      " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n      ") + "\n"
}

// treeFiles lists the working tree's files (tracked, and untracked but not ignored) that exist.
func treeFiles(root string) ([]string, error) {
	out, err := gitOutput(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(out, "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, f)); errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		files = append(files, f)
	}
	return files, nil
}

// copyFiles copies files (relative to root) into dir, keeping modes and symlinks.
func copyFiles(root, dir string, files []string) error {
	for _, f := range files {
		src, dst := filepath.Join(root, f), filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		fi, err := os.Lstat(src)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			continue
		}
		if err := copyFile(src, dst, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("copy %s: %w", f, err)
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close() // read-only: nothing to lose on close
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

func gitOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
