package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/pkgstatus"
)

func newPackagesCmd(g *globals) *cobra.Command {
	var (
		format   string
		features []string
		previous string
	)
	cmd := &cobra.Command{
		Use:   "packages DIR...",
		Short: "Tabulate third-party package results of published builds, package × target",
		Long: `packages reads the build records of third-party-only builds (dorisarm build
--packages, one directory per target: <out>/<doris>/<target>, or <target>.partial
when some packages failed under --keep-going), checks each directory's files
against its record, and prints one row per package: built (time, files, ELF
objects, objects for another machine, instructions of the --feature
extensions, share of objects at the target's flags, scan findings), failed
(the step and the first error line of its log) or not built because a
package it needs failed; then the archives, by digest. Several builds of one
target (a long package list built in parts) merge: a package counts as
built when one of them built it.

--previous merges an earlier table (this command's -o json output, kept
beside the Markdown): what these builds did not try (a package, a target) is
taken from it and marked † in the Markdown; a package built here from other
bytes than the earlier table names, or a target built by another compiler,
is an error.`,
		Example: `  dorisarm packages --feature sve out/2.1.7-rc01/kunpeng920* out/2.1.7-rc01/graviton3* -o markdown`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			// The earlier table first: a bad --previous fails before the
			// builds' files are read and checked.
			var prev *pkgstatus.Table
			if previous != "" {
				var err error
				if prev, err = pkgstatus.ReadTable(previous); err != nil {
					return fault.Inputf("--previous: %w", err)
				}
			}
			t, err := pkgstatus.Load(dirs, pkgstatus.Options{Features: features})
			if err != nil {
				return fault.Input(err)
			}
			if prev != nil {
				if err := t.Merge(prev); err != nil {
					return fault.Input(fmt.Errorf("%s: %w", previous, err))
				}
			}
			if format == "json" {
				return printJSON(g.stdout, t)
			}
			return t.Markdown(g.stdout)
		},
	}
	formatFlag(cmd, &format, "output format: markdown or json", "markdown", "json")
	cmd.Flags().StringVar(&previous, "previous", "", "merge this earlier table (packages -o json): cells these builds did not try come from it")
	inputFlags(cmd, false, "previous")
	cmd.Flags().StringSliceVar(&features, "feature", nil, "count the instructions of these extensions per package (scan names, e.g. sve,sve2)")
	return cmd
}
