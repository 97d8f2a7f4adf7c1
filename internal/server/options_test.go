package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dairuntime/dair/internal/dag"
)

func TestOptions_Validate_cases(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*Options)
		wantErr string // empty: valid
	}{
		{"dev defaults", func(*Options) {}, ""},
		{"dev localhost", func(o *Options) { o.HTTPAddr = "localhost:0" }, ""},
		{"dev ipv6 loopback", func(o *Options) { o.HTTPAddr = "[::1]:8080" }, ""},
		{"dev all interfaces refused", func(o *Options) { o.HTTPAddr = ":8080" }, "not loopback"},
		{"dev public ip refused", func(o *Options) { o.HTTPAddr = "10.0.0.1:8080" }, "not loopback"},
		{"dev public ip with jwt", func(o *Options) {
			o.HTTPAddr, o.Auth, o.JWTSecretFile = "0.0.0.0:8080", AuthJWT, "secret"
		}, ""},
		{"node public ip auth none refused", func(o *Options) { o.HTTPAddr = "0.0.0.0:8080" }, "not loopback"},
		{"metrics auth without jwt", func(o *Options) { o.MetricsAuth = true }, "--metrics-auth needs --auth jwt"},
		{"unknown cluster profile", func(o *Options) { o.ClusterProfile = "bogus" }, `unknown cluster profile "bogus" (want lan or local)`},
		{"local cluster profile", func(o *Options) { o.ClusterProfile = "local" }, ""},
		{"negative liveness ttl", func(o *Options) { o.LivenessTTL = -time.Second }, "liveness ttl -1s: want at least 100ms"},
		{"tiny liveness ttl", func(o *Options) { o.LivenessTTL = time.Millisecond }, "want at least 100ms"},
		{"liveness ttl", func(o *Options) { o.LivenessTTL = 4 * time.Second }, ""},
		{"metrics auth with jwt", func(o *Options) { o.MetricsAuth, o.Auth, o.JWTSecretFile = true, AuthJWT, "secret" }, ""},
		{"public bind without gossip key", func(o *Options) {
			o.StoreURL, o.BindAddr = "redis://127.0.0.1:6379/0", "10.0.0.5:7946"
		}, "give --gossip-key-file"},
		{"all-interfaces bind without gossip key", func(o *Options) {
			o.StoreURL, o.BindAddr = "redis://127.0.0.1:6379/0", "0.0.0.0:7946"
		}, "give --gossip-key-file"},
		{"public join without gossip key", func(o *Options) {
			o.StoreURL, o.BindAddr, o.Join = "redis://127.0.0.1:6379/0", "127.0.0.1:7946", []string{"10.0.0.6:7946"}
		}, "give --gossip-key-file"},
		{"public bind with gossip key", func(o *Options) {
			o.StoreURL, o.BindAddr, o.GossipKeyFile = "redis://127.0.0.1:6379/0", "10.0.0.5:7946", "key"
		}, ""},
		{"partial tls", func(o *Options) {
			o.StoreURL, o.BindAddr, o.TLSCert = "redis://127.0.0.1:6379/0", "127.0.0.1:0", "cert.pem"
		}, "go together"},
		{"tls", func(o *Options) {
			o.StoreURL, o.BindAddr, o.TLSCert, o.TLSKey, o.TLSCA = "redis://127.0.0.1:6379/0", "127.0.0.1:0", "c", "k", "ca"
		}, ""},
		{"tls without cluster", func(o *Options) { o.TLSCert, o.TLSKey, o.TLSCA = "c", "k", "ca" }, "need cluster mode"},
		{"bad http address", func(o *Options) { o.HTTPAddr = "nope" }, "http address"},
		{"jwt without key", func(o *Options) { o.Auth = AuthJWT }, "--jwt-secret-file"},
		{"jwt audience without jwt", func(o *Options) { o.JWTAudience = "dair" }, "need --auth jwt"},
		{"jwt issuer and audience", func(o *Options) {
			o.Auth, o.JWTSecretFile, o.JWTAudience, o.JWTIssuer = AuthJWT, "secret", "dair", "idp"
		}, ""},
		{"negative max steps", func(o *Options) { o.MaxSteps = -1 }, "max steps"},
		{"unknown auth", func(o *Options) { o.Auth = "basic" }, "unknown auth"},
		{"unknown role", func(o *Options) { o.Roles = []string{"worker"} }, "unknown role"},
		{"unknown scheme", func(o *Options) { o.StoreURL = "mysql://x" }, "unknown scheme"},
		{"no scheme", func(o *Options) { o.StoreURL = "/tmp/x.db" }, "want bolt://PATH"},
		{"redis without host", func(o *Options) { o.StoreURL = "redis:///0" }, "missing host"},
		{"bad log level", func(o *Options) { o.LogLevel = "loud" }, "unknown level"},
		{"bad log format", func(o *Options) { o.LogFormat = "xml" }, "unknown format"},
		{"host mode process without redis", func(o *Options) { o.HostMode = HostProcess }, "needs a redis store"},
		{"host mode process", func(o *Options) {
			o.HostMode, o.StoreURL, o.BindAddr = HostProcess, "redis://127.0.0.1:6379/0", "127.0.0.1:0"
		}, ""},
		{"host mode process without control plane", func(o *Options) {
			o.HostMode, o.StoreURL, o.BindAddr, o.Roles = HostProcess, "redis://127.0.0.1:6379/0", "127.0.0.1:0", []string{"runtime"}
		}, "control-plane role"},
		{"host mode attach single node", func(o *Options) { o.HostMode = HostAttach }, "needs cluster mode"},
		{"host mode kubernetes", func(o *Options) { o.HostMode = HostKubernetes }, "not implemented in this build"},
		{"instance settings", func(o *Options) {
			o.Instance, o.InstanceSettings = "tenant-a-runtime-1", `{"tenantId":"tenant-a","isolationMode":"dedicated","runtimeInstanceIdPrefix":"tenant-a-runtime"}`
		}, ""},
		{"instance bad settings", func(o *Options) { o.Instance, o.InstanceSettings = "x-1", "{bad" }, "--instance-settings"},
		{"instance settings without instance", func(o *Options) { o.InstanceSettings = "{}" }, "need --instance"},
		{"instance without runtime role", func(o *Options) { o.Instance, o.Roles = "x-1", []string{"control-plane"} }, "runtime role"},
		{"host mode unknown", func(o *Options) { o.HostMode = "k8s" }, "unknown host mode"},
		{"join with bolt", func(o *Options) { o.Join = []string{"127.0.0.1:7946"} }, "a file store cannot be shared"},
		{"join with redis", func(o *Options) {
			o.StoreURL, o.Join, o.BindAddr = "redis://127.0.0.1:6379/0", []string{"127.0.0.1:7946"}, "127.0.0.1:7947"
		}, ""},
		{"bad join", func(o *Options) { o.StoreURL, o.Join = "redis://127.0.0.1:6379/0", []string{"nohost"} }, "join address"},
		{"bad bind port", func(o *Options) { o.BindAddr = "127.0.0.1:x" }, "bad port"},
		{"bad actor port", func(o *Options) { o.ActorPort = 70000 }, "actor port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := DevOptions()
			tc.mutate(&o)
			err := o.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestOpenStore_cases(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		url     string
		wantErr string
	}{
		{"bolt", "bolt://" + filepath.Join(dir, "sub", "dair.db"), ""},
		{"bolt without path", "bolt://", "missing file path"},
		{"unknown scheme", "etcd://127.0.0.1:2379", "unknown scheme"},
		{"redis without host", "redis://", "missing host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := OpenStore(context.Background(), tc.url)
			if tc.wantErr == "" {
				require.NoError(t, err)
				require.NoError(t, st.Close())
				return
			}
			require.ErrorIs(t, err, ErrInvalidOptions)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// fakePipelines validates like the node (every handler known) and records keys.
type fakePipelines struct{ keys []string }

func (f *fakePipelines) PutPipeline(_ context.Context, src []byte) (*dag.Pipeline, error) {
	p, err := dag.Load(src, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	f.keys = append(f.keys, p.Key)
	return p, nil
}

const goodPipeline = "key: %s\nsteps:\n  - id: a\n    uses: echo\n    with: {value: x}\n"

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	return dir
}

func TestLoadPipelines_cases(t *testing.T) {
	cases := []struct {
		name     string
		files    map[string]string
		wantKeys []string
		wantErr  []string // substrings; nil: no error
	}{
		{"yaml yml json in name order, others ignored", map[string]string{
			"b.yml":     strings.ReplaceAll(goodPipeline, "%s", "beta"),
			"a.yaml":    strings.ReplaceAll(goodPipeline, "%s", "alpha"),
			"c.json":    `{"key":"gamma","steps":[{"id":"a","uses":"echo"}]}`,
			"README.md": "not a pipeline",
		}, []string{"alpha", "beta", "gamma"}, nil},
		{"empty dir", map[string]string{}, []string{}, nil},
		{"invalid pipeline names file and reason", map[string]string{
			"bad.yaml": "key: bad\nsteps:\n  - id: a\n    uses: echo\n    needs: [missing]\n",
		}, nil, []string{"bad.yaml", "unknown_dependency"}},
		{"malformed yaml", map[string]string{"x.yaml": "key: [\n"}, nil, []string{"x.yaml", "parse yaml"}},
		{"two files of one key", map[string]string{
			"a.yaml": strings.ReplaceAll(goodPipeline, "%s", "same"),
			"b.yaml": strings.ReplaceAll(goodPipeline, "%s", "same"),
		}, nil, []string{"b.yaml", `key "same" is defined by`, "a.yaml"}},
		{"over the step limit", map[string]string{
			"big.yaml": "key: big\nsteps:\n" + strings.Repeat("  - {id: a, uses: echo}\n", 1001),
		}, nil, []string{"big.yaml", "too_many_steps"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			keys, err := LoadPipelines(context.Background(), &fakePipelines{}, dir, dag.Limits{})
			if tc.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, tc.wantKeys, keys)
				return
			}
			require.ErrorIs(t, err, ErrBadPipeline)
			for _, s := range tc.wantErr {
				require.ErrorContains(t, err, s)
			}
		})
	}
	t.Run("missing dir", func(t *testing.T) {
		_, err := LoadPipelines(context.Background(), &fakePipelines{}, filepath.Join(t.TempDir(), "none"), dag.Limits{})
		require.True(t, errors.Is(err, ErrBadPipeline), err)
	})
}

// The errors of a store that cannot be opened say what to check and name no internal package.
func TestOpenStore_errorsNameNoInternals(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "dair.db")
	held, err := OpenStore(context.Background(), "bolt://"+db)
	require.NoError(t, err)
	defer held.Close()
	notDir := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cases := []struct{ name, url, want string }{
		{"locked", "bolt://" + db, "another process holds the file"},
		{"not a directory", "bolt://" + filepath.Join(notDir, "x", "dair.db"), "not a directory"},
		{"redis refused", "redis://:s3cret@" + closedAddr + "/0", "connection refused (is Redis running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := OpenStore(context.Background(), tc.url)
			require.Error(t, err)
			require.Nil(t, st)
			var oe *StoreOpenError
			require.ErrorAs(t, err, &oe)
			require.Contains(t, err.Error(), tc.want)
			for _, internal := range []string{"boltstore", "redisstore", "s3cret"} {
				require.NotContains(t, err.Error(), internal)
			}
		})
	}
}
