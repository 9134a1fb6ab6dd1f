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

// Cells that are not ASCII, or are coloured, are padded by the columns
// they take, not by their bytes: the next column starts at one place.
func TestTableNonASCII(t *testing.T) {
	var b bytes.Buffer
	Table(&b, [][]string{
		{"TARGET", "OS", "NOTE"},
		{"kunpeng920", "kylin-v10", "x"},
		{"kunpeng—920", "Kylin V10 “SP1”", "y"},
		{"graviton3", Paint(true, false, "débian-12"), "z"},
		{"ampère", "—", ""},
	})
	want := "TARGET       OS               NOTE\n" +
		"kunpeng920   kylin-v10        x\n" +
		"kunpeng—920  Kylin V10 “SP1”  y\n" +
		"graviton3    \033[31mdébian-12\033[0m        z\n" +
		"ampère       —\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	for _, c := range []struct {
		s    string
		want int
	}{{"", 0}, {"abc", 3}, {"—", 1}, {"ü", 1}, {"“SP1”", 5}, {Paint(true, true, "ok"), 2}, {"\033[1;31mab", 2}, {"\033[", 0}} {
		if got := width(c.s); got != c.want {
			t.Errorf("width(%q) = %d, want %d", c.s, got, c.want)
		}
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

func TestFit(t *testing.T) {
	for _, c := range []struct {
		in   string
		cols int
		want string
	}{
		{"short", 80, "short"},
		{"exactly9!", 10, "exactly9!"},
		{"exactly10!", 10, "exactly1…"},
		{"kunpeng920 [3/9] thirdparty:BRPC started", 20, "kunpeng920 [3/9] t…"},
		{"日本語のテキスト", 5, "日本語…"},
		{"\033[32mbuilt\033[0m kunpeng920 in 3s", 12, "\033[32mbuilt\033[0m kunp…\033[0m"},
		{"anything", 1, "anything"},
	} {
		got := Fit(c.in, c.cols)
		if got != c.want {
			t.Errorf("Fit(%q, %d) = %q, want %q", c.in, c.cols, got, c.want)
		}
		if c.cols >= 2 && width(got) >= c.cols {
			t.Errorf("Fit(%q, %d) takes %d columns", c.in, c.cols, width(got))
		}
	}
}
