package patch

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/dorisarm/dorisarm/internal/datafile"
)

// FileDiff is the part of a unified diff about one file.
type FileDiff struct {
	OldName string // as written after "--- " (timestamp removed)
	NewName string // as written after "+++ "
	Create  bool   // the old side is /dev/null
	Delete  bool   // the new side is /dev/null
	Hunks   []*Hunk
	Line    int // line in the patch file where this file's diff starts
}

// Hunk is one @@ block.
type Hunk struct {
	OldStart, OldLines int
	NewStart, NewLines int
	Lines              []HunkLine
	// OldNoEOL / NewNoEOL: the last old / new line has no newline at end of file.
	OldNoEOL, NewNoEOL bool
	Line               int // line of the @@ header in the patch file
}

// HunkLine is one line of a hunk: Op is ' ', '-' or '+'.
type HunkLine struct {
	Op   byte
	Text string
}

// Old returns the lines the hunk expects (context and removed).
func (h *Hunk) Old() []string {
	var out []string
	for _, l := range h.Lines {
		if l.Op != '+' {
			out = append(out, l.Text)
		}
	}
	return out
}

// New returns the lines the hunk leaves (context and added).
func (h *Hunk) New() []string {
	var out []string
	for _, l := range h.Lines {
		if l.Op != '-' {
			out = append(out, l.Text)
		}
	}
	return out
}

// context returns how many leading and trailing lines are context.
func (h *Hunk) context() (lead, trail int) {
	for _, l := range h.Lines {
		if l.Op != ' ' {
			break
		}
		lead++
	}
	for i := len(h.Lines) - 1; i >= 0 && h.Lines[i].Op == ' '; i-- {
		trail++
	}
	return lead, trail
}

// ParseDiff parses a unified diff. file and firstLine place errors: firstLine
// is the line of the file body starts on.
func ParseDiff(file string, body []byte, firstLine int) ([]*FileDiff, error) {
	lines := splitLines(body)
	var errs datafile.List
	fail := func(i int, f string, a ...any) {
		errs = append(errs, datafile.Errorf(datafile.Pos{File: file, Line: firstLine + i, Col: 1}, f, a...))
	}
	var files []*FileDiff
	var git *FileDiff // a pending "diff --git" header
	i := 0
	for i < len(lines) {
		l := trimCR(lines[i])
		switch {
		case strings.HasPrefix(l, "diff --git "):
			git = &FileDiff{Line: firstLine + i}
			i++
			continue
		case git != nil && (strings.HasPrefix(l, "GIT binary patch") || strings.HasPrefix(l, "Binary files ")):
			fail(i, "binary diffs are not supported; ship binary files another way")
			return nil, errs
		case strings.HasPrefix(l, "Binary files "):
			fail(i, "binary diffs are not supported; ship binary files another way")
			return nil, errs
		case git != nil && (strings.HasPrefix(l, "new file mode 120000") || strings.HasPrefix(l, "deleted file mode 120000") ||
			strings.HasPrefix(l, "new mode 120000") || strings.HasPrefix(l, "old mode 120000")):
			fail(i, "symbolic links are refused: a patch may only change regular files")
			return nil, errs
		case git != nil && (strings.HasPrefix(l, "rename from ") || strings.HasPrefix(l, "copy from ")):
			fail(i, "renames and copies are not supported; express them as a deletion and a creation")
			return nil, errs
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(trimCR(lines[i+1]), "+++ "):
			fd := &FileDiff{Line: firstLine + i, OldName: diffName(l[4:]), NewName: diffName(trimCR(lines[i+1])[4:])}
			if git != nil {
				fd.Line = git.Line
				git = nil
			}
			fd.Create = fd.OldName == "/dev/null"
			fd.Delete = fd.NewName == "/dev/null"
			if fd.Create && fd.Delete {
				fail(i, "both sides are /dev/null")
				return nil, errs
			}
			i += 2
			for i < len(lines) && strings.HasPrefix(trimCR(lines[i]), "@@ ") {
				h, next, err := parseHunk(lines, i)
				if err != "" {
					at := next
					if strings.Contains(err, "ends early") {
						at = i // point at the header whose counts are wrong
					}
					fail(at, "%s", err)
					return nil, errs
				}
				h.Line = firstLine + i
				fd.Hunks = append(fd.Hunks, h)
				i = next
				if i < len(lines) && len(lines[i]) > 0 && strings.ContainsRune(" -+", rune(lines[i][0])) &&
					!(strings.HasPrefix(string(lines[i]), "--- ") && i+1 < len(lines) && strings.HasPrefix(string(lines[i+1]), "+++ ")) {
					fail(h.Line-firstLine, "hunk %q has more lines than its header counts (line %d is %q)", trimCR(lines[h.Line-firstLine]), firstLine+i, trimCR(lines[i]))
					return nil, errs
				}
			}
			if len(fd.Hunks) == 0 {
				fail(i, "file %s has no hunks (expected a line starting with \"@@ \")", fd.NewName)
				return nil, errs
			}
			if fd.Create && (len(fd.Hunks) != 1 || fd.Hunks[0].OldLines != 0) {
				fail(i, "a created file's diff must be one hunk starting \"@@ -0,0 \"")
				return nil, errs
			}
			if fd.Delete && (len(fd.Hunks) != 1 || fd.Hunks[0].NewLines != 0) {
				fail(i, "a deleted file's diff must be one hunk ending \" +0,0 @@\"")
				return nil, errs
			}
			files = append(files, fd)
			continue
		case strings.HasPrefix(l, "@@ "):
			fail(i, "hunk header without a preceding ---/+++ file header")
			return nil, errs
		}
		i++
	}
	if len(files) == 0 {
		fail(0, "no file diffs found")
		return nil, errs
	}
	return files, errs.Err()
}

// parseHunk reads the hunk whose header is lines[i]; it returns the index after it.
func parseHunk(lines [][]byte, i int) (*Hunk, int, string) {
	hdr := trimCR(lines[i])
	h := &Hunk{}
	rest, ok := strings.CutPrefix(hdr, "@@ -")
	if !ok {
		return nil, i, "broken hunk header " + strconv.Quote(hdr)
	}
	end := strings.Index(rest, " @@")
	if end < 0 {
		return nil, i, "broken hunk header " + strconv.Quote(hdr) + ": no closing @@"
	}
	ranges := strings.Fields(rest[:end])
	if len(ranges) != 2 || !strings.HasPrefix(ranges[1], "+") {
		return nil, i, "broken hunk header " + strconv.Quote(hdr) + ": expected \"@@ -a,b +c,d @@\""
	}
	var err error
	if h.OldStart, h.OldLines, err = parseRange(ranges[0]); err != nil {
		return nil, i, "broken hunk header " + strconv.Quote(hdr) + ": " + err.Error()
	}
	if h.NewStart, h.NewLines, err = parseRange(ranges[1][1:]); err != nil {
		return nil, i, "broken hunk header " + strconv.Quote(hdr) + ": " + err.Error()
	}
	oldLeft, newLeft := h.OldLines, h.NewLines
	i++
	for oldLeft > 0 || newLeft > 0 {
		if i >= len(lines) {
			return nil, i, fmt.Sprintf("hunk %q ends early: %d old and %d new lines missing (the counts in its header do not match its body)", hdr, oldLeft, newLeft)
		}
		raw := lines[i]
		text := string(raw)
		var op byte = ' '
		if len(text) > 0 {
			op = text[0]
			text = text[1:]
		} // an empty line is an empty context line (some editors strip the space)
		switch op {
		case ' ':
			oldLeft--
			newLeft--
		case '-':
			oldLeft--
		case '+':
			newLeft--
		case '\\':
			i++
			continue // a marker for the previous line; handled below
		default:
			return nil, i, fmt.Sprintf("hunk %q: line %q is not context, removal or addition, but %d old and %d new lines are still expected (the counts in its header do not match its body)", hdr, trimCR(raw), oldLeft, newLeft)
		}
		if oldLeft < 0 || newLeft < 0 {
			return nil, i, fmt.Sprintf("hunk %q has more lines than its header counts", hdr)
		}
		h.Lines = append(h.Lines, HunkLine{Op: op, Text: text})
		i++
		// "\ No newline at end of file" applies to the line just read.
		if i < len(lines) && bytes.HasPrefix(lines[i], []byte("\\ ")) {
			switch op {
			case ' ':
				h.OldNoEOL, h.NewNoEOL = true, true
			case '-':
				h.OldNoEOL = true
			case '+':
				h.NewNoEOL = true
			}
			i++
		}
	}
	return h, i, ""
}

// maxLine bounds hunk line numbers and counts: no source file a patch
// edits has 16 million lines, and larger numbers only overflow offsets.
const maxLine = 1 << 24

func parseRange(s string) (start, count int, err error) {
	a, b, hasCount := strings.Cut(s, ",")
	if start, err = digits(a); err != nil {
		return 0, 0, fmt.Errorf("bad line number %q", a)
	}
	if start > maxLine {
		return 0, 0, fmt.Errorf("line number %s is too large", a)
	}
	count = 1
	if hasCount {
		if count, err = digits(b); err != nil {
			return 0, 0, fmt.Errorf("bad line count %q", b)
		}
	}
	if count > maxLine {
		return 0, 0, fmt.Errorf("line count %d is too large", count)
	}
	return start, count, nil
}

// digits parses a plain decimal number: no sign, no spaces.
func digits(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a number")
	}
	if len(s) > 18 {
		return maxLine + 1, nil // too large either way, and no overflow
	}
	return strconv.Atoi(s)
}

// diffName strips the timestamp diff -u appends after a tab.
func diffName(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			s = u
		}
	}
	return s
}

func trimCR(b []byte) string { return strings.TrimSuffix(string(b), "\r") }

// splitLines splits on \n, keeping any \r; a final newline yields no empty last line.
func splitLines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	parts := bytes.Split(b, []byte("\n"))
	if len(parts[len(parts)-1]) == 0 {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// Target returns the path the file diff changes after stripping strip
// leading components, or an error when the path is unsafe.
func (fd *FileDiff) Target(strip int) (string, error) {
	name := fd.NewName
	if fd.Delete {
		name = fd.OldName
	}
	return stripPath(name, strip)
}

func (fd *FileDiff) oldTarget(strip int) (string, error) { return stripPath(fd.OldName, strip) }

func stripPath(name string, strip int) (string, error) {
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("path %q is absolute; patches may only name paths inside the source tree", name)
	}
	parts := strings.Split(name, "/")
	if strip > len(parts)-1 {
		return "", fmt.Errorf("path %q has fewer than %d leading components to strip", name, strip)
	}
	rel := path.Clean(strings.Join(parts[strip:], "/"))
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "\x00") {
		return "", fmt.Errorf("path %q escapes the source tree", name)
	}
	for _, p := range parts[strip:] {
		if p == ".." {
			return "", fmt.Errorf("path %q escapes the source tree (it contains ..)", name)
		}
		// A repository's metadata is not source: a hook written there
		// runs on the next git command in the tree.
		if strings.EqualFold(p, ".git") {
			return "", fmt.Errorf("path %q is inside a .git directory; patches may change only source files", name)
		}
	}
	return rel, nil
}
