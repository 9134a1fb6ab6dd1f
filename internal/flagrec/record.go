// Package flagrec reads the compile flags an object records about itself
// and resolves them the way the compiler driver does: which architecture
// level and extensions the code may use, the tuning, how atomics are done,
// LTO and PGO. It then judges them against a target's flags and CPU.
//
// Records come in two forms. GCC (-frecord-gcc-switches, and the
// DW_AT_producer of -grecord-gcc-switches) writes "GNU C17 12.2.0" and the
// options its driver passed to cc1, one -march kept of several. Clang
// (-frecord-command-line) writes the driver's own command line, program
// first, with spaces inside an argument escaped by a backslash; its
// DW_AT_producer (-grecord-command-line) writes its banner and then the
// same line. Older GCC wrote one switch per string; Parse takes those
// joined.
package flagrec

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"
)

// Record is one recorded compiler invocation.
type Record struct {
	Dialect string   `json:"dialect"` // gcc or clang
	Args    []string `json:"args"`
}

// Digest identifies a record by its dialect and arguments (sha256, hex):
// the same compile read from an object and from a file it was linked
// into has the same digest, so a build can tell which objects a record
// came from.
func (r Record) Digest() string {
	h := sha256.New()
	h.Write([]byte(r.Dialect))
	for _, a := range r.Args {
		h.Write([]byte{0})
		h.Write([]byte(a))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Parse reads one recorded command line; ok is false when s is not one
// (a DW_AT_producer without switches, a version banner).
func Parse(s string) (Record, bool) {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "GNU "); ok {
		// "GNU C17 12.2.0 -mcpu=tsv110 ...": the language, the version, the switches.
		f := strings.Fields(rest)
		if len(f) < 2 {
			return Record{}, false
		}
		args := f[2:]
		if len(args) == 0 {
			return Record{}, false
		}
		return Record{Dialect: "gcc", Args: args}, true
	}
	if strings.HasPrefix(s, "-") {
		// Switches alone (old GCC, one per string, joined by the caller).
		return Record{Dialect: "gcc", Args: strings.Fields(s)}, true
	}
	args := splitEscaped(s)
	if len(args) < 2 {
		return Record{}, false
	}
	if !strings.Contains(path.Base(args[0]), "clang") || args[1] == "version" {
		// Not a command line: a clang DW_AT_producer holds one after its
		// banner ("Debian clang version", "clang version").
		line, ok := clangProducer(s)
		if !ok {
			return Record{}, false
		}
		if args = splitEscaped(line); len(args) < 2 || !strings.Contains(path.Base(args[0]), "clang") {
			return Record{}, false
		}
	}
	return Record{Dialect: "clang", Args: args[1:]}, true
}

// clangProducer gives back the command line in clang's DW_AT_producer
// with -grecord-command-line: the banner ("Debian clang version 16.0.6
// (15~deb12u1)", where the parentheses may hold a repository and a
// revision), then the driver's command line; ok is false for a banner
// alone.
func clangProducer(s string) (line string, ok bool) {
	_, rest, ok := strings.Cut(s, "clang version ")
	_, rest, hasVersion := strings.Cut(strings.TrimLeft(rest, " "), " ") // past the version
	if !ok || !hasVersion {
		return "", false
	}
	rest = strings.TrimLeft(rest, " ")
	for strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return "", false
		}
		rest = strings.TrimLeft(rest[end+1:], " ")
	}
	return rest, rest != ""
}

// splitEscaped splits at unescaped spaces; a backslash escapes the next byte.
func splitEscaped(s string) []string {
	var out []string
	var b strings.Builder
	have := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			have = true
		case c == ' ' || c == '\t' || c == '\n':
			if have {
				out = append(out, b.String())
				b.Reset()
				have = false
			}
		default:
			b.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, b.String())
	}
	return out
}

// Split turns the strings of a .GCC.command.line section (or a list of
// producers) into records: whole command lines stand alone, and runs of
// bare switches (old GCC) are joined into one.
func Split(strs []string) []Record {
	var out []Record
	var loose []string
	flush := func() {
		if len(loose) > 0 {
			if r, ok := Parse(strings.Join(loose, " ")); ok {
				out = append(out, r)
			}
			loose = nil
		}
	}
	for _, s := range strs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.HasPrefix(s, "-") && !strings.Contains(s, " ") {
			loose = append(loose, s)
			continue
		}
		flush()
		if r, ok := Parse(s); ok {
			out = append(out, r)
		}
	}
	flush()
	return out
}
