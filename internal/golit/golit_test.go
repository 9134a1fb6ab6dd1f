package golit

import (
	"strings"
	"testing"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

type level string

type inner struct {
	Tags []string
	On   bool
	Pos  datafile.Pos
}

type outer struct {
	Name  string
	N     int
	Lvl   level
	Items map[string]*inner
	Empty []string
	Nil   []string
	Keys  datafile.Keys
	skip  int
}

func TestLiteral(t *testing.T) {
	p := datafile.Pos{File: "m.yaml", Line: 3, Col: 5}
	v := &outer{
		Name: "a\"b", N: -2, Lvl: "x",
		Items: map[string]*inner{"z": {Tags: []string{"t1", "t2"}, Pos: p}, "a": {On: true}},
		Empty: []string{},
		Keys:  datafile.Keys{"name": p},
	}
	w := &Writer{Pkg: "github.com/dorisarm/dorisarm/internal/golit", File: "m.yaml", FileVar: "f"}
	got, err := w.Literal(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`&outer{`, `Name: "a\"b",`, `N: -2,`, `Lvl: level("x"),`,
		`Items: map[string]*inner{`, `"a": {` + "\n\t\t\tOn: true,",
		`Tags: []string{"t1", "t2"},`, `Pos: datafile.Pos{File: f, Line: 3, Col: 5},`,
		`Empty: []string{},`, `Keys: datafile.Keys{` + "\n\t\t\"name\": {File: f, Line: 3, Col: 5},",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Index(got, `"a": {`) > strings.Index(got, `"z": {`) {
		t.Errorf("map keys not sorted:\n%s", got)
	}
	if strings.Contains(got, "Nil") || strings.Contains(got, "skip") {
		t.Errorf("nil or unexported fields written:\n%s", got)
	}
}

func TestLiteralRefuses(t *testing.T) {
	w := &Writer{Pkg: "github.com/dorisarm/dorisarm/internal/golit", File: "m.yaml", FileVar: "f"}
	shared := &inner{}
	for name, v := range map[string]any{
		"shared pointer": &outer{Items: map[string]*inner{"a": shared, "b": shared}},
		"other file":     &inner{Pos: datafile.Pos{File: "other.yaml", Line: 1}},
		"unexported":     &outer{skip: 1},
		"float":          struct{ F float64 }{1.5},
	} {
		if _, err := w.Literal(v); err == nil {
			t.Errorf("%s: written without an error", name)
		}
	}
}
