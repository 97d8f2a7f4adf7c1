package jsonvalid_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dairuntime/dair/internal/jsonvalid"
)

type inner struct {
	Uses string         `json:"uses"`
	With map[string]any `json:"with,omitempty"`
}

type Embedded struct {
	Labels map[string]string `json:"labels"`
}

type outer struct {
	Embedded
	Pipeline string           `json:"pipeline"`
	TenantID string           `json:"tenant_id"`
	Rate     float64          `json:"runs_per_second"`
	Steps    []inner          `json:"steps"`
	ByName   map[string]inner `json:"by_name"`
	Raw      json.RawMessage  `json:"raw"`
	Plain    string
	Skipped  string `json:"-"`
}

func TestFields(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string // want: "" for nil, else a part of the message
	}{
		{"exact names pass", `{"pipeline":"p","tenant_id":"t","steps":[{"uses":"echo"}]}`, ""},
		{"a field in another case", `{"Pipeline":"p"}`, `unknown field "Pipeline" (at Pipeline): field names are case-sensitive; the field is "pipeline"`},
		{"two spellings of one field", `{"tenant_id":"a","TENANT_ID":"b"}`, `unknown field "TENANT_ID"`},
		{"in a list of structs", `{"steps":[{"uses":"a"},{"USES":"b"}]}`, `(at steps[1].USES)`},
		{"in a map of structs", `{"by_name":{"x":{"Uses":"b"}}}`, `(at by_name.x.Uses)`},
		{"map keys are free", `{"steps":[{"uses":"a","with":{"Value":1,"value":2}}],"labels":{"A":"1"}}`, ""},
		{"a promoted field", `{"Labels":{}}`, `the field is "labels"`},
		{"an untagged field by its Go name", `{"Plain":"x"}`, ""},
		{"an untagged field in another case", `{"plain":"x"}`, `the field is "Plain"`},
		{"a value decoded by its own UnmarshalJSON", `{"raw":{"Pipeline":1}}`, ""},
		{"an unknown field is the decoder's", `{"nope":1}`, ""},
		{"a float that underflows", `{"runs_per_second":1e-400}`, `number 1e-400 (at runs_per_second) is too small for a 64-bit float`},
		{"zero is zero", `{"runs_per_second":0.0e-400}`, ""},
		{"the smallest float", `{"runs_per_second":5e-324}`, ""},
		{"not JSON is the decoder's", `{"Pipeline":`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := jsonvalid.Fields([]byte(tc.doc), &outer{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Fields(%s) = %v, want nil", tc.doc, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Fields(%s) = %v, want an error with %q", tc.doc, err, tc.want)
			case err != nil && !errors.Is(err, jsonvalid.ErrInvalid):
				t.Fatalf("Fields(%s) = %v, not ErrInvalid", tc.doc, err)
			}
		})
	}
}
