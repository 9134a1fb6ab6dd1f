package scan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// arFile writes an ar archive of raw members: each name goes into the
// header as it is (a BSD long name is written "#1/N" by the caller).
func arFile(members ...[2]string) []byte {
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range members {
		fmt.Fprintf(&b, "%-16s%-12s%-6s%-6s%-8s%-10d`\n", m[0], "0", "0", "0", "644", len(m[1]))
		b.WriteString(m[1])
		if len(m[1])%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// TestArSpecialNames: only the exact names of the symbol and long-name
// tables are skipped, and only when they are not ELF objects. GNU ld links
// a member named "__.SYMDEFevil.o" like any other (the scan skipped every
// name starting "__.SYMDEF").
func TestArSpecialNames(t *testing.T) {
	elf := string(magicELF) + "rest of an object"
	table := "\x00\x00\x00\x01\x00\x00\x00\x08f\x00"
	a := arFile(
		[2]string{"/", table},
		[2]string{"//", "a-long-member-name.o/\n"},
		[2]string{"__.SYMDEFevil.o/", elf},
		[2]string{"__.SYMDEF", table},
		[2]string{"#1/20", "__.SYMDEF SORTED\x00\x00\x00\x00" + table},
		[2]string{"#1/19", "__.SYMDEF_64 SORTED" + elf},
		[2]string{"/SYM64/", elf},
		[2]string{"/0", elf},
	)
	ms, err := readAr(a)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	want := []string{"__.SYMDEFevil.o", "__.SYMDEF_64 SORTED", "/SYM64/", "a-long-member-name.o"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("members %q, want %q", names, want)
	}
}

// TestArSymdefNamedObject: an x86 object named like a BSD symbol table in
// an arm64 archive is foreign code (it was skipped: clean, exit 0).
func TestArSymdefNamedObject(t *testing.T) {
	obj := x86Object(t)
	p := filepath.Join(t.TempDir(), "libsymdef.a")
	os.WriteFile(p, arFile([2]string{"/", "\x00\x00\x00\x00"}, [2]string{"__.SYMDEFevil.o/", string(obj)}), 0o644)
	r := scan(t, policy(t, "kunpeng920"), p)
	if r.Summary.Clean || len(findings(r, KindForeignArch)) != 1 {
		t.Errorf("%+v %+v", r.Summary, r.Findings)
	}
}
