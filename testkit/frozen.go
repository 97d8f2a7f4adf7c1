package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// frozenTimeout bounds how long Stop waits for a SIGSTOPped process to be stopped.
const frozenTimeout = 10 * time.Second

// waitFrozen waits until every thread of process pid is stopped (state T or t in
// /proc/PID/task/*/stat): a SIGSTOP takes effect only once a thread of the process handles it,
// which on a loaded machine can take a while, during which other threads still run. Without
// /proc it returns at once.
func waitFrozen(pid int) error {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	deadline := time.Now().Add(frozenTimeout)
	tk := time.NewTicker(time.Millisecond)
	defer tk.Stop()
	for {
		running, err := runningThreads(dir)
		if err != nil {
			return err
		}
		if running == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d: %d thread(s) still running %v after SIGSTOP", pid, running, frozenTimeout)
		}
		<-tk.C
	}
}

// runningThreads counts the threads under a /proc/PID/task directory that are not stopped.
func runningThreads(dir string) (int, error) {
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", dir, err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread exited
		}
		// "tid (comm) S ...": the state follows the last ')'.
		s := string(b)
		rest := strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:])
		if rest == "" || (rest[0] != 'T' && rest[0] != 't') {
			n++
		}
	}
	return n, nil
}
