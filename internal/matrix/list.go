package matrix

import (
	"fmt"
	"io"
	"strings"

	"github.com/dorisarm/dorisarm/internal/textfmt"
)

// Listed is a cell as dorisarm matrix lists it: plain values, for JSON.
type Listed struct {
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

// List is every cell of m (Cells), as plain values.
func (m *Matrix) List() []Listed {
	var out []Listed
	for _, c := range m.Cells() {
		out = append(out, Listed{
			Cell: c.Name(), Doris: c.Doris.Series, Versions: c.Doris.Versions, Target: c.Target.Name, CPU: c.CPU.Name,
			ISA: c.ISA.Name, OS: c.OS.ID, Glibc: c.OS.Glibc, PageSize: c.PageSize(), Compilers: c.Target.Compilers,
			March: c.Target.March, Mtune: c.Target.Mtune, PGO: c.Target.PGO, LTO: c.Target.LTO, OpenSSL: c.Target.OpenSSL,
			Patches: c.Target.Patches, Qemu: c.Qemu.Name, Enabled: c.Enabled, Allowed: c.Allowed, BaseImage: c.Target.BaseImage,
		})
	}
	return out
}

// WriteTable prints m's cells for people, one row each, and a line saying
// how many there are and that m is valid.
func (m *Matrix) WriteTable(w io.Writer) {
	cells := m.List()
	rows := [][]string{{"CELL", "CPU", "OS", "GLIBC", "PAGE", "COMPILERS", "-MARCH", "PGO", "LTO", "OPENSSL", "QEMU"}}
	for _, c := range cells {
		rows = append(rows, []string{c.Cell, c.CPU, c.OS, c.Glibc, fmt.Sprintf("%dK", c.PageSize/1024),
			strings.Join(c.Compilers, ","), c.March, yesNo(c.PGO), ltoString(c.LTO), c.OpenSSL, c.Qemu})
	}
	textfmt.Table(w, rows)
	fmt.Fprintf(w, "%d cells; %s is valid (%s)\n", len(cells), m.File, m.Digest[:19])
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

// ltoString is a target's LTO modes, clang's first: "clang:thin,gcc:auto".
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
