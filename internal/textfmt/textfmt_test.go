package textfmt

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	var b bytes.Buffer
	Table(&b, [][]string{{"A", "LONGER", "x"}, {"aaaa", "b", ""}})
	want := "A     LONGER  x\naaaa  b\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

func TestColor(t *testing.T) {
	env := func(v map[string]string) func(string) string { return func(k string) string { return v[k] } }
	for _, c := range []struct {
		mode   string
		env    map[string]string
		tty    bool
		want   bool
		wantOK bool
	}{
		{"auto", nil, true, true, true},
		{"auto", map[string]string{"NO_COLOR": "1"}, true, false, true},
		{"auto", map[string]string{"TERM": "dumb"}, true, false, true},
		{"auto", nil, false, false, true},
		{"always", nil, false, true, true},
		{"never", nil, true, false, true},
		{"sometimes", nil, true, false, false},
	} {
		got, ok := UseColor(c.mode, env(c.env), c.tty)
		if got != c.want || ok != c.wantOK {
			t.Errorf("%+v: %v %v", c, got, ok)
		}
	}
	if Paint(false, true, "ok") != "ok" || Paint(true, false, "FAIL") != "\033[31mFAIL\033[0m" || Paint(true, true, "ok") != "\033[32mok\033[0m" {
		t.Error("Paint")
	}
}

func TestJSONWritesNoNull(t *testing.T) {
	type inner struct {
		List []string
		Map  map[string]int
		Raw  []byte
		Opt  []int           `json:",omitempty"`
		Ptr  *inner          `json:",omitempty"` // an absent object is left out
		RawJ json.RawMessage `json:",omitempty"`
	}
	type outer struct {
		Items   []inner
		ByName  map[string]inner
		Ptrs    map[string]*inner
		Nested  inner
		private []int
	}
	v := outer{Items: []inner{{}}, ByName: map[string]inner{"a": {}}, Ptrs: map[string]*inner{"p": {}}}
	var b strings.Builder
	if err := JSON(&b, v); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "null") {
		t.Errorf("null in:\n%s", b.String())
	}
	// A value passed by value is not changed; through a pointer it is filled.
	if v.Nested.List != nil {
		t.Error("JSON changed a value passed by value")
	}
	b.Reset()
	JSON(&b, &v)
	if v.Nested.List == nil || strings.Contains(b.String(), "null") || strings.Contains(b.String(), "Opt") {
		t.Errorf("through a pointer: %+v\n%s", v.Nested, b.String())
	}
	if v.private != nil { // unexported: JSON does not write it, so it is left alone
		t.Errorf("an unexported field was filled: %#v", v.private)
	}
}
