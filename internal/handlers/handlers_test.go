package handlers

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dairuntime/dair/internal/step"
)

func TestRegister_Register_names(t *testing.T) {
	reg := step.NewRegistry()
	if err := Register(reg, Options{}); err != nil {
		t.Fatalf("register: %v", err)
	}
	want := []string{"agent.publish", "agent.send", "echo", "fail", "http", "llm.chat", "sleep"}
	if got := reg.Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
	cases := []struct {
		name string
		reg  *step.Registry
		is   error
	}{
		{"duplicate", reg, step.ErrDuplicateHandler},
		{"nil registry", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Register(tc.reg, Options{})
			if err == nil {
				t.Fatal("want error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
		})
	}
}

func TestConvert_asInt64_kinds(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want int64
		ok   bool
	}{
		{"int", 3, 3, true},
		{"int32", int32(-4), -4, true},
		{"uint8", uint8(5), 5, true},
		{"uint64 huge", uint64(1 << 63), 0, false},
		{"float integral", 6.0, 6, true},
		{"float fractional", 6.5, 0, false},
		{"json int", json.Number("7"), 7, true},
		{"json float integral", json.Number("8.0"), 8, true},
		{"json bad", json.Number("x"), 0, false},
		{"string", "9", 0, false},
		{"nil", nil, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := asInt64(tc.in)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Fatalf("asInt64(%#v) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestConvert_asDuration_kinds(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want time.Duration
		ok   bool
	}{
		{"go string", "1m30s", 90 * time.Second, true},
		{"millis string", "250", 250 * time.Millisecond, true},
		{"int", 100, 100 * time.Millisecond, true},
		{"json", json.Number("1.5"), 1500 * time.Microsecond, true},
		{"overflow", int64(1) << 62, 0, false},
		{"garbage", "later", 0, false},
		{"map", map[string]any{}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := asDuration(tc.in)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Fatalf("asDuration(%#v) = %s, %v; want %s, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}
