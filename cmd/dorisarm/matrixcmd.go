package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newMatrixCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Validate matrix.yaml and list its cells (Doris series × target)",
		Example: `  dorisarm matrix
  dorisarm matrix -o json | jq '.[] | select(.target=="kunpeng920")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := g.loadMatrix()
			if err != nil {
				return err
			}
			if format == "json" {
				return printJSON(g.stdout, m.List())
			}
			m.WriteTable(g.stdout)
			for _, w := range m.Warnings() {
				fmt.Fprintln(g.stderr, "note: "+w)
			}
			return nil
		},
	}
	formatFlag(cmd, &format, "output format: table or json", "table", "json")
	return cmd
}
