package http

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dairuntime/dair/messages"
	"github.com/dairuntime/dair/providers/remote"
)

// maxCommandBytes bounds a command body the server reads.
const maxCommandBytes = 8 << 20

// handler serves a runtime host's command endpoints.
type handler struct {
	backend   remote.Backend
	instances remote.Instances
	now       func() time.Time
}

// NewHandler returns the command server of a runtime host over backend, serving the instances
// instances lists (a command for another instance is answered 404). The handler is
// goroutine-safe; each request blocks until the instance answers.
func NewHandler(backend remote.Backend, instances remote.Instances) http.Handler {
	h := &handler{backend: backend, instances: instances, now: time.Now}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+CommandsPath, h.commands)
	mux.HandleFunc("POST /runtime-instance/dispatch", typed(h, func(m *messages.DispatchRequest) *messages.RuntimeCommand {
		return &messages.RuntimeCommand{RuntimeInstanceId: m.GetRuntimeInstanceId(), Command: &messages.RuntimeCommand_Dispatch{Dispatch: m}}
	}, func(r *messages.RuntimeCommandResult) proto.Message { return r.GetResult() }))
	mux.HandleFunc("POST /runtime-instance/status", typed(h, func(m *messages.QueueStatusRequest) *messages.RuntimeCommand {
		return &messages.RuntimeCommand{RuntimeInstanceId: m.GetRuntimeInstanceId(), Command: &messages.RuntimeCommand_Status{Status: m}}
	}, func(r *messages.RuntimeCommandResult) proto.Message { return r.GetStatus() }))
	mux.HandleFunc("POST /runtime-instance/run-status", typed(h, func(m *messages.RunStatusRequest) *messages.RuntimeCommand {
		return &messages.RuntimeCommand{RuntimeInstanceId: m.GetRuntimeInstanceId(), Command: &messages.RuntimeCommand_RunStatus{RunStatus: m}}
	}, func(r *messages.RuntimeCommandResult) proto.Message { return r.GetRunStatus() }))
	mux.HandleFunc("POST /runtime-instance/control", typed(h, func(m *messages.ControlRequest) *messages.RuntimeCommand {
		return &messages.RuntimeCommand{RuntimeInstanceId: m.GetRuntimeInstanceId(), Command: &messages.RuntimeCommand_Control{Control: m}}
	}, func(r *messages.RuntimeCommandResult) proto.Message { return r.GetResult() }))
	mux.HandleFunc("POST /runtime-instance/heartbeat", typed(h, func(m *messages.HeartbeatRequest) *messages.RuntimeCommand {
		return &messages.RuntimeCommand{RuntimeInstanceId: m.GetRuntimeInstanceId(), Command: &messages.RuntimeCommand_Heartbeat{Heartbeat: m}}
	}, func(r *messages.RuntimeCommandResult) proto.Message { return r.GetHeartbeat() }))
	mux.HandleFunc("GET /runtime-instance/instances", h.list)
	return mux
}

// commands serves the envelope endpoint.
func (h *handler) commands(w http.ResponseWriter, r *http.Request) {
	cmd := &messages.RuntimeCommand{}
	if !h.decode(w, r, cmd) {
		return
	}
	if res, ok := h.execute(w, r, cmd); ok {
		h.write(w, r, res)
	}
}

// typed serves one sibling endpoint: its body becomes a command, and pick takes the answer out
// of the command's result.
func typed[M proto.Message](h *handler, wrap func(M) *messages.RuntimeCommand, pick func(*messages.RuntimeCommandResult) proto.Message) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var m M
		m = m.ProtoReflect().Type().New().Interface().(M)
		if !h.decode(w, r, m) {
			return
		}
		res, ok := h.execute(w, r, wrap(m))
		if !ok {
			return
		}
		if out := pick(res); out != nil && out.ProtoReflect().IsValid() {
			h.write(w, r, out)
			return
		}
		h.write(w, r, res.GetResult())
	}
}

// execute runs cmd when this host serves its instance; otherwise it answers 404.
func (h *handler) execute(w http.ResponseWriter, r *http.Request, cmd *messages.RuntimeCommand) (*messages.RuntimeCommandResult, bool) {
	id := remote.CommandInstance(cmd)
	if !slices.Contains(h.instances(), id) {
		http.Error(w, fmt.Sprintf("runtime instance %q is not served here", id), http.StatusNotFound)
		return nil, false
	}
	if cmd.RuntimeInstanceId == "" {
		cmd.RuntimeInstanceId = id
	}
	return remote.Execute(r.Context(), h.backend, cmd, h.now()), true
}

// list serves GET /runtime-instance/instances.
func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	h.write(w, r, remote.List(r.Context(), h.backend, h.instances()))
}

// decode reads the request body into m (protobuf or JSON by Content-Type); on failure it
// answers 400 and returns false.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCommandBytes))
	if err == nil {
		if isJSON(r.Header.Get("Content-Type")) {
			err = protojson.Unmarshal(b, m)
		} else {
			err = proto.Unmarshal(b, m)
		}
	}
	if err != nil {
		http.Error(w, "bad command body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// write answers m in the request's encoding.
func (h *handler) write(w http.ResponseWriter, r *http.Request, m proto.Message) {
	var b []byte
	var err error
	ct := ContentTypeProtobuf
	if isJSON(r.Header.Get("Content-Type")) || (r.Method == http.MethodGet && isJSON(r.Header.Get("Accept"))) {
		ct = ContentTypeJSON
		b, err = protojson.Marshal(m)
	} else {
		b, err = proto.Marshal(m)
	}
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ct)
	if _, err := w.Write(b); err != nil {
		return // the caller went away; it retries or gives up
	}
}

func isJSON(ct string) bool { return strings.HasPrefix(strings.TrimSpace(ct), ContentTypeJSON) }
