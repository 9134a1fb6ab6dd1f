package main

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

// The table of top-level commands names each command as it names itself.
func TestCommandTable(t *testing.T) {
	g := newGlobals()
	var names []string
	for _, c := range commands {
		if got := c.make(g).Name(); got != c.name {
			t.Errorf("commands lists %q for the command named %q", c.name, got)
		}
		names = append(names, c.name)
	}
	var all []string
	for _, c := range newRoot().Commands() {
		all = append(all, c.Name())
	}
	slices.Sort(names)
	slices.Sort(all)
	if !slices.Equal(names, all) {
		t.Errorf("the tree has %v, the table %v", all, names)
	}
}

// newRootFor builds one top-level command when the arguments name it, the
// whole tree otherwise, and cobra finds the same command either way.
func TestRootForArgs(t *testing.T) {
	full := len(newRoot().Commands())
	for _, c := range []struct {
		args []string
		only string // "": the whole tree
	}{
		{[]string{"scan", "--target", "kunpeng920", "x.so"}, "scan"},
		{[]string{"--matrix", "m.yaml", "scan", "x"}, "scan"},
		{[]string{"--matrix=m.yaml", "--color", "never", "patch", "check"}, "patch"},
		{[]string{"-h", "plan"}, ""}, // cobra takes "plan" for -h's value here too
		{[]string{"image", "build", "--help"}, "image"},
		{[]string{"version"}, "version"},
		{[]string{"--matrix", "scan"}, ""}, // "scan" is --matrix's value
		{nil, ""},
		{[]string{"--help"}, ""},
		{[]string{"help", "scan"}, ""},
		{[]string{"scna"}, ""},
		{[]string{"completion", "bash"}, ""},
		{[]string{"__complete", "scan", "--target", ""}, ""},
	} {
		root := newRootFor(c.args)
		var names []string
		for _, s := range root.Commands() {
			names = append(names, s.Name())
		}
		switch {
		case c.only == "" && len(names) != full:
			t.Errorf("%q: built %v, want the whole tree (%d commands)", c.args, names, full)
		case c.only != "" && !slices.Equal(names, []string{c.only}):
			t.Errorf("%q: built %v, want only %s", c.args, names, c.only)
		}
		got, _, gerr := root.Find(c.args)
		want, _, werr := newRoot().Find(c.args)
		if path(got) != path(want) || (gerr == nil) != (werr == nil) {
			t.Errorf("%q: finds %s (%v), the whole tree %s (%v)", c.args, path(got), gerr, path(want), werr)
		}
	}
}

func path(c *cobra.Command) string {
	if c == nil {
		return "<nil>"
	}
	return c.CommandPath()
}
