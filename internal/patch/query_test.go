package patch

import (
	"path/filepath"
	"slices"
	"testing"

	goversion "github.com/hashicorp/go-version"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/matrix"
)

func TestQuery(t *testing.T) {
	m, err := matrix.Load(filepath.Join("..", "..", "matrix.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Series{Patches: []*Patch{
		{Component: "bitshuffle", Number: 1, Name: "scalar", AppliesTo: ">= 0.5, < 0.6", Targets: []string{"kunpeng920"}},
		{Component: "bitshuffle", Number: 2, Name: "nosve", AppliesTo: ">= 0.5", Targets: []string{"!sve"}},
		{Component: "doris", Number: 1, Name: "old", AppliesTo: "< 2.1"},
		{Component: "doris", Number: 2, Name: "new", AppliesTo: ">= 2.1", Targets: []string{"+sve"}},
	}}
	for _, p := range s.Patches {
		c, err := goversion.NewConstraint(p.AppliesTo)
		if err != nil {
			t.Fatal(err)
		}
		p.constraint = c
	}
	ids := func(q Query) []string {
		t.Helper()
		ps, err := s.Query(m, q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.ID())
		}
		return out
	}
	for _, c := range []struct {
		q    Query
		want []string
	}{
		{Query{}, []string{"bitshuffle/0001-scalar", "bitshuffle/0002-nosve", "doris/0001-old", "doris/0002-new"}},
		{Query{Component: "bitshuffle", Version: "0.5.1", Target: "kunpeng920"}, []string{"bitshuffle/0001-scalar", "bitshuffle/0002-nosve"}},
		{Query{Component: "bitshuffle", Version: "0.6.0", Target: "kunpeng920"}, []string{"bitshuffle/0002-nosve"}},
		{Query{Component: "bitshuffle", Version: "0.5.1", Target: "graviton3"}, nil},
		{Query{Doris: "2.1.8"}, []string{"bitshuffle/0001-scalar", "bitshuffle/0002-nosve", "doris/0002-new"}},
		{Query{Doris: "2.1.8", Target: "graviton3"}, []string{"doris/0002-new"}},
		{Query{Target: "graviton3"}, []string{"doris/0001-old", "doris/0002-new"}},
	} {
		if got := ids(c.q); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, got, c.want)
		}
	}
	for _, bad := range []Query{
		{Component: "bitshuffle", Version: "five"},
		{Target: "kunpeng921"},
		{Doris: "9.9.9", Target: "kunpeng920"},
		{Doris: "two", Target: "kunpeng920"},
	} {
		if _, err := s.Query(m, bad); !fault.IsInput(err) {
			t.Errorf("%+v: %v, want bad input", bad, err)
		}
	}
}
