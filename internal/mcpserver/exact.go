package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/dairuntime/dair/internal/jsonvalid"
)

// addExact adds a tool whose input carries arbitrary JSON (a run's input, an agent message)
// that must reach the node as the caller wrote it. The SDK's typed tools decode the arguments
// into map[string]any to check them against the schema, which turns 9007199254740993 into
// 9007199254740992 and an unpaired surrogate into U+FFFD before the tool sees them. This one
// advertises the same schema (inferred from In) and decodes the arguments itself: their text is
// checked (jsonvalid), numbers stay json.Number (re-encoded digit for digit), unknown fields
// and missing required ones are refused.
func addExact[In any](s *mcp.Server, svc *service, t *mcp.Tool, fn call[In]) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %s: %v", t.Name, err))
	}
	anyJSON(schema, reflect.TypeFor[In]())
	t.InputSchema = schema
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in In
		if err := decodeExact(req.Params.Arguments, schema.Required, &in); err != nil {
			svc.cfg.Logger.Debug("mcp tool refused its arguments", zap.String("tool", t.Name), zap.Error(err))
			return errorResult(err), nil
		}
		out, summary, err := fn(ctx, svc.client(req), in)
		if err != nil {
			svc.cfg.Logger.Debug("mcp tool failed", zap.String("tool", t.Name), zap.Error(err))
			return errorResult(err), nil
		}
		svc.cfg.Logger.Debug("mcp tool", zap.String("tool", t.Name))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary}}, StructuredContent: out}, nil
	})
}

// anyJSON makes the schema of each json.RawMessage field of struct type typ "any JSON value"
// (inferred, it would be an array of bytes), keeping its description.
func anyJSON(schema *jsonschema.Schema, typ reflect.Type) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type != reflect.TypeFor[json.RawMessage]() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if p := schema.Properties[name]; p != nil {
			schema.Properties[name] = &jsonschema.Schema{Description: p.Description}
		}
	}
}

// decodeExact decodes the JSON object args into v (a struct pointer) keeping numbers as
// json.Number, after checking that args is valid text and holds every field of required.
func decodeExact(args json.RawMessage, required []string, v any) error {
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	if err := jsonvalid.Check(args); err != nil {
		return fmt.Errorf("%w: arguments: %v", ErrBadArgument, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(args, &fields); err != nil {
		return fmt.Errorf("%w: the arguments must be a JSON object", ErrBadArgument)
	}
	for _, name := range required {
		if _, ok := fields[name]; !ok {
			return fmt.Errorf("%w: %s", ErrMissingArgument, name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s", ErrBadArgument, decodeProblem(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the arguments object", ErrBadArgument)
	}
	if err := jsonvalid.Fields(args, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadArgument, err)
	}
	return nil
}

// decodeProblem words a json decoding error without Go types.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "a " + te.Type.Kind().String()
		switch te.Type.Kind().String() {
		case "bool":
			want = "true or false"
		case "int", "int32", "int64", "uint", "uint32", "uint64":
			want = "an integer"
		}
		return fmt.Sprintf("%s: want %s, got %s", te.Field, want, te.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return msg
}
