package jsonvalid

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Fields returns nil when every object key of the well-formed document b that encoding/json
// would match to a field of a struct in v's type names that field exactly, and every number
// it would decode into a float field is one a float64 holds; else a *Error matching
// ErrInvalid, naming the key with its path. encoding/json matches field names ignoring case
// (and keeps the last of two spellings), so without this check `{"Pipeline": …}` passes a
// strict decoder, and `{"tenant_id": "a", "TENANT_ID": "b"}` reads as tenant b to dair and as
// tenant a to anything that inspects the exact key. A number such as 1e-400 decodes as 0
// without an error, and 0 often means "no limit". Keys of maps, and values decoded by their own
// UnmarshalJSON, are not checked. b that does not decode as JSON passes (the decoder reports
// it). It is goroutine-safe.
func Fields(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil
	}
	return fieldsOf(doc, reflect.TypeOf(v), "")
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func fieldsOf(doc any, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || doc == nil {
		return nil
	}
	if pt := reflect.PointerTo(t); pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		fields := structFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the first problem named is the same on every call
		for _, k := range keys {
			at := k
			if path != "" {
				at = path + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, k) {
						return &Error{Offset: -1, Msg: fmt.Sprintf("unknown field %q (at %s): field names are case-sensitive; the field is %q",
							truncate([]byte(k)), at, name)}
					}
				}
				continue // unknown in every spelling: the strict decoder refuses it
			}
			if err := fieldsOf(obj[k], ft, at); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := doc.([]any)
		if !ok {
			return nil
		}
		for i, x := range arr {
			if err := fieldsOf(x, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		for k, x := range obj {
			if err := fieldsOf(x, t.Elem(), path+"."+k); err != nil {
				return err
			}
		}
	case reflect.Float32, reflect.Float64:
		n, ok := doc.(json.Number)
		if !ok {
			return nil
		}
		if f, err := strconv.ParseFloat(string(n), t.Bits()); err == nil && f == 0 && nonZeroMantissa(string(n)) {
			return &Error{Offset: -1, Msg: fmt.Sprintf("number %s (at %s) is too small for a %d-bit float: it would be 0",
				truncate([]byte(n)), path, t.Bits())}
		}
	}
	return nil
}

// nonZeroMantissa reports whether the number literal n has a non-zero digit before its
// exponent.
func nonZeroMantissa(n string) bool {
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		n = n[:i]
	}
	return strings.ContainsAny(n, "123456789")
}

// fieldCache holds structFields per struct type.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields returns the JSON names of t's fields as encoding/json sees them (tag names,
// else Go names; untagged embedded structs promote theirs), each with its type.
func structFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(m, t, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(m map[string]reflect.Type, t reflect.Type, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct && depth < 8 {
				addFields(m, et, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := m[name]; !taken || depth == 0 {
			m[name] = ft
		}
	}
}
