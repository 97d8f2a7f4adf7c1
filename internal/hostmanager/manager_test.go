package hostmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/local"
	"github.com/dairuntime/dair/testkit"
)

// Environment of the helper process: the test binary re-executed as a fake `dair node`.
const (
	envHelperDir  = "HOSTMANAGER_HELPER_DIR"  // where the helper writes its arguments
	envIgnoreTerm = "HOSTMANAGER_IGNORE_TERM" // "1": the helper ignores SIGTERM
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envHelperDir); dir != "" {
		os.Exit(helperMain(dir))
	}
	goleak.VerifyTestMain(m)
}

// helperMain records its arguments in dir/<instance>.args, exits 3 at once when the instance
// id contains "crash", and otherwise waits for SIGTERM (exit 0) unless told to ignore it.
func helperMain(dir string) int {
	args := os.Args[1:]
	instance := ""
	for i, a := range args {
		if a == "--instance" && i+1 < len(args) {
			instance = args[i+1]
		}
	}
	if err := os.WriteFile(filepath.Join(dir, instance+".args"), []byte(strings.Join(args, "\n")), 0o600); err != nil {
		return 1
	}
	if strings.Contains(instance, "crash") {
		return 3
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	for range ch {
		if os.Getenv(envIgnoreTerm) != "1" {
			return 0
		}
	}
	return 0
}

// exits collects the OnExit reports of a manager.
type exits struct {
	mu   sync.Mutex // guards list
	list []Exit
}

func (e *exits) add(x Exit) {
	e.mu.Lock()
	e.list = append(e.list, x)
	e.mu.Unlock()
}

func (e *exits) get() []Exit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Exit(nil), e.list...)
}

// processManager returns a process-mode manager spawning the helper, stopped at cleanup.
func processManager(t *testing.T, mut func(*Config)) (*Manager, *exits, string) {
	t.Helper()
	dir := t.TempDir()
	ex := &exits{}
	cfg := Config{Mode: ModeProcess, Binary: os.Args[0], StoreURL: "redis://127.0.0.1:1/0",
		Seeds: func() []string { return []string{"127.0.0.1:7946"} }, DataDir: dir, ClusterProfile: "local",
		Env: []string{envHelperDir + "=" + dir}, StopTimeout: 2 * time.Second, OnExit: ex.add}
	if mut != nil {
		mut(&cfg)
	}
	m, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, m.Stop(ctx))
	})
	return m, ex, dir
}

func readArgs(t *testing.T, dir, instance string) []string {
	t.Helper()
	var b []byte
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool {
		var err error
		b, err = os.ReadFile(filepath.Join(dir, instance+".args"))
		return err == nil && len(b) > 0
	}, "helper wrote its arguments")
	return strings.Split(string(b), "\n")
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func TestParseMode_cases(t *testing.T) {
	cases := []struct {
		in      string
		want    Mode
		wantErr error
	}{
		{"fixture", ModeFixture, nil},
		{"process", ModeProcess, nil},
		{"attach", ModeAttach, nil},
		{"kubernetes", ModeKubernetes, nil},
		{"k8s", "", ErrUnknownMode},
		{"", "", ErrUnknownMode},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMode(tc.in)
			require.ErrorIs(t, err, tc.wantErr)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNew_config(t *testing.T) {
	seeds := func() []string { return []string{"127.0.0.1:1"} }
	cases := []struct {
		name    string
		cfg     Config
		wantErr error
	}{
		{"kubernetes not implemented", Config{Mode: ModeKubernetes}, ErrNotImplemented},
		{"unknown mode", Config{Mode: "pods"}, ErrUnknownMode},
		{"fixture without host", Config{Mode: ModeFixture}, ErrInvalidConfig},
		{"default mode is fixture", Config{}, ErrInvalidConfig},
		{"process without store", Config{Mode: ModeProcess, Seeds: seeds}, ErrInvalidConfig},
		{"process without seeds", Config{Mode: ModeProcess, StoreURL: "redis://x:1/0"}, ErrInvalidConfig},
		{"process ok", Config{Mode: ModeProcess, StoreURL: "redis://x:1/0", Seeds: seeds}, nil},
		{"attach ok", Config{Mode: ModeAttach}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.cfg)
			require.ErrorIs(t, err, tc.wantErr)
			if err == nil {
				require.NoError(t, m.Stop(context.Background()))
			}
		})
	}
	_, err := New(Config{Mode: ModeKubernetes})
	require.Contains(t, err.Error(), "not implemented in this build")
}

// fakeHost records CreateInstance calls.
type fakeHost struct {
	mu  sync.Mutex // guards ids
	ids []string
	err error
}

func (f *fakeHost) CreateInstance(_ context.Context, id string, _ *messages.TenantSettings, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = append(f.ids, id)
	return f.err
}

func (f *fakeHost) created() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

func TestManager_CreateInstance_fixture(t *testing.T) {
	cases := []struct {
		name    string
		hostErr error
	}{
		{"delegates", nil},
		{"wraps host error", errors.New("boom")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHost{err: tc.hostErr}
			m, err := New(Config{Mode: ModeFixture, Fixture: h})
			require.NoError(t, err)
			err = m.CreateInstance(context.Background(), "runtime-instance-1", &messages.TenantSettings{}, "")
			if tc.hostErr != nil {
				require.ErrorIs(t, err, tc.hostErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, []string{"runtime-instance-1"}, h.created())
			require.NoError(t, m.Stop(context.Background()))
			require.ErrorIs(t, m.CreateInstance(context.Background(), "x", &messages.TenantSettings{}, ""), ErrStopped)
		})
	}
}

func TestManager_Attach_cases(t *testing.T) {
	cases := []struct {
		name    string
		d       *messages.CapacityDescriptor
		wantErr error
	}{
		{"actor address", &messages.CapacityDescriptor{RuntimeInstanceId: "ext-1", Address: "127.0.0.1:9000", HostId: "far"}, nil},
		{"endpoint", &messages.CapacityDescriptor{RuntimeInstanceId: "ext-2", Endpoint: "http://127.0.0.1:9001"}, nil},
		{"no id", &messages.CapacityDescriptor{Address: "127.0.0.1:9000"}, ErrInvalidDescriptor},
		{"no address", &messages.CapacityDescriptor{RuntimeInstanceId: "ext-3"}, ErrInvalidDescriptor},
		{"nil", nil, ErrInvalidDescriptor},
	}
	m, err := New(Config{Mode: ModeAttach})
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, m.Attach(context.Background(), tc.d), tc.wantErr)
		})
	}
	hosts := m.Hosts()
	require.Len(t, hosts, 2)
	require.Equal(t, "ext-1", hosts[0].InstanceID)
	require.True(t, hosts[0].ManagedElsewhere)
	require.Equal(t, ModeAttach, hosts[0].Mode)
	require.ErrorIs(t, m.CreateInstance(context.Background(), "runtime-instance-1", &messages.TenantSettings{}, ""), ErrAttachOnly)
	require.NoError(t, m.Stop(context.Background()))
	require.Len(t, m.Hosts(), 2, "attached hosts are never stopped")
}

func TestManager_CreateInstance_process(t *testing.T) {
	m, ex, dir := processManager(t, nil)
	settings := &messages.TenantSettings{TenantId: "tenant-a", RuntimeInstanceIdPrefix: "tenant-a-runtime", MaxRuntimeInstances: 3}
	require.NoError(t, m.CreateInstance(context.Background(), "tenant-a-runtime-1", settings, "scaleout-1"))
	args := readArgs(t, dir, "tenant-a-runtime-1")
	require.Equal(t, "node", args[0])
	for flag, want := range map[string]string{
		"--roles": "runtime", "--store": "redis://127.0.0.1:1/0", "--join": "127.0.0.1:7946",
		"--node-id": "host-tenant-a-runtime-1", "--bind": "127.0.0.1:0", "--http": "127.0.0.1:0",
		"--cluster-profile": "local", "--instance": "tenant-a-runtime-1", "--instance-scale-out-request": "scaleout-1",
	} {
		require.Equal(t, want, flagValue(args, flag), flag)
	}
	require.Contains(t, flagValue(args, "--instance-settings"), `"tenantId":"tenant-a"`)
	hosts := m.Hosts()
	require.Len(t, hosts, 1)
	require.Equal(t, "host-tenant-a-runtime-1", hosts[0].HostID)
	require.Positive(t, hosts[0].PID)
	require.FileExists(t, filepath.Join(dir, "hosts", "host-tenant-a-runtime-1.log"))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.Stop(ctx))
	require.Empty(t, m.Hosts())
	got := ex.get()
	require.Len(t, got, 1)
	require.True(t, got[0].Requested)
	require.Equal(t, 1.0, counterValue(t, m.metrics.exits.WithLabelValues("requested")))
	require.ErrorIs(t, m.CreateInstance(context.Background(), "tenant-a-runtime-2", settings, ""), ErrStopped)
}

func TestManager_supervise_unexpectedExit(t *testing.T) {
	m, ex, _ := processManager(t, nil)
	require.NoError(t, m.CreateInstance(context.Background(), "crash-1", &messages.TenantSettings{TenantId: "t"}, ""))
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return len(ex.get()) == 1 }, "exit reported")
	got := ex.get()[0]
	require.False(t, got.Requested)
	require.Error(t, got.Err)
	require.Equal(t, "crash-1", got.Host.InstanceID)
	require.Equal(t, 1.0, counterValue(t, m.metrics.exits.WithLabelValues("unexpected")))
	testkit.Eventually(t, 15*time.Second, 10*time.Millisecond, func() bool { return len(m.Hosts()) == 0 }, "child forgotten")
}

func TestManager_Stop_killsAfterTimeout(t *testing.T) {
	m, ex, dir := processManager(t, func(c *Config) {
		c.StopTimeout = 200 * time.Millisecond
		c.Env = append(c.Env, envIgnoreTerm+"=1")
	})
	require.NoError(t, m.CreateInstance(context.Background(), "stubborn-1", &messages.TenantSettings{TenantId: "t"}, ""))
	readArgs(t, dir, "stubborn-1") // the helper has installed its signal handler
	start := time.Now()
	require.NoError(t, m.Stop(context.Background()))
	require.Less(t, time.Since(start), 5*time.Second)
	got := ex.get()
	require.Len(t, got, 1)
	require.True(t, got[0].Requested)
	require.Error(t, got[0].Err, "killed by SIGKILL")
}

func TestManager_CreateInstance_replacesReusedID(t *testing.T) {
	m, ex, dir := processManager(t, nil)
	ctx := context.Background()
	require.NoError(t, m.CreateInstance(ctx, "runtime-instance-1", &messages.TenantSettings{TenantId: "t"}, "r1"))
	readArgs(t, dir, "runtime-instance-1")
	first := m.Hosts()[0].PID
	require.NoError(t, m.CreateInstance(ctx, "runtime-instance-1", &messages.TenantSettings{TenantId: "t"}, "r2"))
	hosts := m.Hosts()
	require.Len(t, hosts, 1)
	require.NotEqual(t, first, hosts[0].PID)
	require.Equal(t, "r2", hosts[0].ScaleOutRequestID)
	// The replaced child's exit is reported by its own reaper goroutine.
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return len(ex.get()) >= 1 }, "replaced child's exit reported")
	got := ex.get()
	require.Len(t, got, 1)
	require.True(t, got[0].Requested)
	require.Equal(t, first, got[0].Host.PID)
}

func TestManager_reap_hostWithoutInstance(t *testing.T) {
	var mu sync.Mutex // guards registered
	registered := true
	m, ex, _ := processManager(t, func(c *Config) {
		c.ReapAfter = 100 * time.Millisecond
		c.Instances = func(context.Context) ([]*messages.CapacityDescriptor, error) {
			mu.Lock()
			defer mu.Unlock()
			if !registered {
				return nil, nil
			}
			return []*messages.CapacityDescriptor{{RuntimeInstanceId: "tenant-a-runtime-1", HostId: "host-tenant-a-runtime-1",
				Status: messages.InstanceReady}}, nil
		}
	})
	require.NoError(t, m.CreateInstance(context.Background(), "tenant-a-runtime-1", &messages.TenantSettings{TenantId: "t"}, ""))
	// Registered: kept well past ReapAfter.
	deadline := time.Now().Add(400 * time.Millisecond)
	testkit.Eventually(t, time.Second, 20*time.Millisecond, func() bool { return time.Now().After(deadline) }, "grace elapsed")
	require.Len(t, m.Hosts(), 1)
	require.Empty(t, ex.get())
	mu.Lock()
	registered = false
	mu.Unlock()
	testkit.Eventually(t, 10*time.Second, 10*time.Millisecond, func() bool { return len(ex.get()) == 1 }, "host reaped")
	require.True(t, ex.get()[0].Requested)
}

func TestProvider_ScaleOut_idempotentPerRequest(t *testing.T) {
	settings := &messages.TenantSettings{TenantId: "tenant-a", IsolationMode: messages.IsolationDedicated,
		RuntimeInstanceIdPrefix: "tenant-a-runtime", MaxRuntimeInstances: 1}
	cases := []struct {
		name        string
		existing    []*messages.CapacityDescriptor
		wantID      string
		wantCreated []string
	}{
		{"existing instance of the request is reused", []*messages.CapacityDescriptor{{RuntimeInstanceId: "tenant-a-runtime-1",
			TenantId: "tenant-a", IsolationMode: messages.IsolationDedicated, Status: messages.InstanceReady,
			Metadata: map[string]string{MetadataScaleOutRequestID: "req-1"}}}, "tenant-a-runtime-1", nil},
		{"no instance yet: created", nil, "tenant-a-runtime-1", []string{"tenant-a-runtime-1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex // guards list
			list := tc.existing
			h := &fakeHost{}
			host := hostFunc(func(ctx context.Context, id string, s *messages.TenantSettings, req string) error {
				mu.Lock()
				list = append(list, &messages.CapacityDescriptor{RuntimeInstanceId: id, TenantId: s.TenantId,
					IsolationMode: s.IsolationMode, Status: messages.InstanceReady, Metadata: map[string]string{MetadataScaleOutRequestID: req}})
				mu.Unlock()
				return h.CreateInstance(ctx, id, s, req)
			})
			p := NewProvider(local.Config{Host: host, Instances: func(context.Context) ([]*messages.CapacityDescriptor, error) {
				mu.Lock()
				defer mu.Unlock()
				return append([]*messages.CapacityDescriptor(nil), list...), nil
			}, ReadyTimeout: 2 * time.Second})
			require.Equal(t, ProviderName, p.Name())
			res := p.ScaleOut(context.Background(), &messages.ScaleOutRequest{RequestId: "req-1", Settings: settings})
			require.True(t, res.Result.GetOk(), fmt.Sprint(res.Result))
			require.Equal(t, []string{tc.wantID}, res.InstanceIDs)
			require.Equal(t, tc.wantCreated, h.created())
		})
	}
}

// hostFunc adapts a function to local.Host.
type hostFunc func(ctx context.Context, id string, s *messages.TenantSettings, req string) error

func (f hostFunc) CreateInstance(ctx context.Context, id string, s *messages.TenantSettings, req string) error {
	return f(ctx, id, s, req)
}

// counterValue reads a counter's current value.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var out dto.Metric
	require.NoError(t, c.Write(&out))
	return out.GetCounter().GetValue()
}
