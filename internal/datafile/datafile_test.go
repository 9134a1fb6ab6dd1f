package datafile

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/fault"
)

type inner struct {
	Name  string            `yaml:"name"`
	Count int               `yaml:"count"`
	On    bool              `yaml:"on"`
	Tags  []string          `yaml:"tags"`
	Env   map[string]string `yaml:"env"`
	Pos   Pos
	Keys  Keys
}

type outer struct {
	Items map[string]*inner `yaml:"items" shape:"is keyed by item name: a: {name: x}"`
	List  []inner           `yaml:"list"`
	Pos   Pos
	Keys  Keys
}

func TestDecodePositions(t *testing.T) {
	src := "items:\n  a:\n    name: x\n    count: 3\n    on: true\n    tags: [p, q]\nlist:\n  - name: y\n"
	var o outer
	if err := Decode("f.yaml", []byte(src), &o); err != nil {
		t.Fatal(err)
	}
	a := o.Items["a"]
	if a.Name != "x" || a.Count != 3 || !a.On || len(a.Tags) != 2 || o.List[0].Name != "y" {
		t.Fatalf("decoded %+v", a)
	}
	if a.Pos.String() != "f.yaml:3:5" || a.Keys["count"].String() != "f.yaml:4:12" {
		t.Errorf("positions %v %v", a.Pos, a.Keys["count"])
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string]string{
		"items:\n  a:\n    nmae: x\n":        `f.yaml:3:5: at items.a: unknown key "nmae" (known keys: count, env, name, on, tags)`,
		"items:\n  a:\n    count: three\n":   `f.yaml:3:12: at items.a.count: expected a whole number, found the value "three"`,
		"items:\n  a:\n    on: yes please\n": "expected true or false",
		"items:\n  a:\n    tags: p\n":        "at items.a.tags: expected a list",
		"items: [1, 2]\n":                    "at items: expected a mapping, found a list (items is keyed by item name: a: {name: x})",
		// Deeper, the innermost shaped field says what it holds.
		"items:\n  a: just a\n":                `at items.a: expected a mapping, found the value "just a" (items is keyed by item name: a: {name: x})`,
		"items:\n  a: {name: x, name: y}\n":    `key "name" appears twice`,
		"items:\n  a:\n    name:\n":            "expected a string, found nothing (null)",
		"list:\n  - name: [1]\n":               "at list[0].name: expected a string",
		"items:\n  a: {name: x}\n  a: {}\n":    `key "a" appears twice`,
		"items:\n\t- bad\n":                    "YAML syntax error",
		"":                                     "file is empty",
		"just a string\n":                      "at the top level: expected a mapping",
		"items:\n  a:\n    env: {k: {x: 1}}\n": "at items.a.env.k: expected a string, found a mapping",
		// A second document would be ignored: its exceptions, its settings.
		"items: {}\n---\nitems:\n  a: {name: x}\n": "f.yaml:3:1: a second YAML document",
		"items: {}\n---\n- 1\n":                    "f.yaml:3:1: a second YAML document",
		"items: {}\n---\n[\n":                      "YAML syntax error",
	}
	for src, want := range cases {
		var o outer
		err := Decode("f.yaml", []byte(src), &o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", src, err, want)
		}
		if err != nil && !fault.IsInput(err) {
			t.Errorf("%q: not a data error", src)
		}
	}
}

// A document marker with nothing after it, or before the first document,
// hides nothing: the file decodes.
func TestDecodeOneDocument(t *testing.T) {
	for _, src := range []string{"items: {}\n---\n", "---\nitems: {}\n", "items: {}\n...\n"} {
		var o outer
		if err := Decode("f.yaml", []byte(src), &o); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestAliases(t *testing.T) {
	src := "items:\n  a: &base {name: x, count: 1}\n  b: *base\n"
	var o outer
	if err := Decode("f.yaml", []byte(src), &o); err != nil {
		t.Fatal(err)
	}
	if o.Items["b"].Name != "x" {
		t.Errorf("alias not followed: %+v", o.Items["b"])
	}
}

// FuzzDecode: any bytes give a value or an error, never a panic.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"items:\n  a:\n    name: x\n", "list: [{name: y, tags: [a]}]", "&a [*a]", "items: {a: {env: {x: y}}}", "\t"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var o outer
		_ = Decode("fuzz.yaml", data, &o)
	})
}

type fanout struct {
	Kids []fanout `yaml:"kids"`
	Name string   `yaml:"name"`
}

// TestAliasExpansionBounded: a "billion laughs" file (nine levels of ten
// aliases each) and a mapping of thousands of unknown keys aliased a
// thousand times stop at MaxValues with one positioned error, and at most
// MaxErrors errors are printed.
func TestAliasExpansionBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("l0: &l0 {name: x}\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "l%d: &l%d {kids: [", i, i)
		for j := 0; j < 10; j++ {
			fmt.Fprintf(&b, "*l%d,", i-1)
		}
		b.WriteString("]}\n")
	}
	var m map[string]fanout
	err := Decode("laughs.yaml", []byte(b.String()), &m)
	if err == nil || !strings.Contains(err.Error(), "more than 200000 values") || !fault.IsInput(err) {
		t.Fatalf("billion laughs: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "laughs.yaml:") {
		t.Errorf("error without its file: %v", err)
	}

	b.Reset()
	b.WriteString("items:\n  a: &a {")
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&b, "unknown%d: 1, ", i)
	}
	b.WriteString("}\n")
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "  b%d: *a\n", i)
	}
	var o outer
	err = Decode("keys.yaml", []byte(b.String()), &o)
	if err == nil || len(err.Error()) > 64<<10 {
		t.Fatalf("aliased unknown keys: %d bytes of errors", len(fmt.Sprint(err)))
	}

	// Errors past MaxErrors are counted, not printed.
	b.Reset()
	b.WriteString("items:\n")
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "  i%d: {bogus: 1}\n", i)
	}
	err = Decode("many.yaml", []byte(b.String()), &o)
	if got := strings.Count(err.Error(), "unknown key"); got != MaxErrors {
		t.Errorf("%d unknown-key errors printed, want %d", got, MaxErrors)
	}
	if !strings.Contains(err.Error(), "and 450 more errors") {
		t.Errorf("the dropped errors are not counted: %.200s", err.Error()[len(err.Error())-200:])
	}

	if err := Decode("big.yaml", make([]byte, MaxSize+1), &o); err == nil || !strings.Contains(err.Error(), "data files are at most") {
		t.Errorf("oversized file: %v", err)
	}
}
