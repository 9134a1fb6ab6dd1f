package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

type cellJSON struct {
	Cell      string            `json:"cell"`
	Doris     string            `json:"doris"`
	Versions  string            `json:"versions"`
	Target    string            `json:"target"`
	CPU       string            `json:"cpu"`
	ISA       string            `json:"isa"`
	OS        string            `json:"os"`
	Glibc     string            `json:"glibc_max"`
	PageSize  int               `json:"page_size"`
	Compilers []string          `json:"compilers"`
	March     string            `json:"march"`
	Mtune     bool              `json:"mtune"`
	PGO       bool              `json:"pgo"`
	LTO       map[string]string `json:"lto,omitempty"`
	OpenSSL   string            `json:"openssl"`
	Patches   []string          `json:"patches,omitempty"`
	Qemu      string            `json:"qemu"`
	Enabled   []string          `json:"enabled"`
	Allowed   []string          `json:"allowed"`
	BaseImage string            `json:"base_image"`
}

func newMatrixCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Validate matrix.yaml and list its cells (Doris series × target)",
		Example: `  dorisarm matrix
  dorisarm matrix --format json | jq '.[] | select(.target=="kunpeng920")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := g.loadMatrix()
			if err != nil {
				return err
			}
			var cells []cellJSON
			for _, c := range m.Cells() {
				cells = append(cells, cellJSON{
					Cell: c.Name(), Doris: c.Doris.Series, Versions: c.Doris.Versions, Target: c.Target.Name, CPU: c.CPU.Name,
					ISA: c.ISA.Name, OS: c.OS.ID, Glibc: c.OS.Glibc, PageSize: c.PageSize(), Compilers: c.Target.Compilers,
					March: c.Target.March, Mtune: c.Target.Mtune, PGO: c.Target.PGO, LTO: c.Target.LTO, OpenSSL: c.Target.OpenSSL,
					Patches: c.Target.Patches, Qemu: c.Qemu.Name, Enabled: c.Enabled, Allowed: c.Allowed, BaseImage: c.Target.BaseImage,
				})
			}
			if format == "json" {
				return printJSON(g.stdout, cells)
			}
			rows := [][]string{{"CELL", "CPU", "OS", "GLIBC", "PAGE", "COMPILERS", "-MARCH", "PGO", "LTO", "OPENSSL", "QEMU"}}
			for _, c := range cells {
				rows = append(rows, []string{c.Cell, c.CPU, c.OS, c.Glibc, fmt.Sprintf("%dK", c.PageSize/1024),
					strings.Join(c.Compilers, ","), c.March, yesNo(c.PGO), ltoString(c.LTO), c.OpenSSL, c.Qemu})
			}
			table(g.stdout, rows)
			fmt.Fprintf(g.stdout, "%d cells; %s is valid (%s)\n", len(cells), m.File, m.Digest[:19])
			for _, w := range m.Warnings() {
				fmt.Fprintln(g.stderr, "note: "+w)
			}
			return nil
		},
	}
	formatFlag(cmd, &format, "output format: table or json", "table", "json")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

func ltoString(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, d := range []string{"clang", "gcc"} {
		if v, ok := m[d]; ok {
			parts = append(parts, d+":"+v)
		}
	}
	return strings.Join(parts, ",")
}

var _ = matrix.DefaultFile
