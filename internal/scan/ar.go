package scan

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// arMember is one member of an ar archive.
type arMember struct {
	Name string
	Data []byte // nil for thin-archive members (see Path)
	Path string // thin archives: the member's file, relative to the archive
}

// arSpecial are the names of an archive's symbol tables (GNU "/" and
// "/SYM64/", BSD "__.SYMDEF…") and GNU long-name table ("//"): exactly
// these, and only when they are not ELF objects, are not members. The linker
// links any other name, "__.SYMDEFevil.o" included, as an object.
var arSpecial = map[string]bool{
	"/": true, "//": true, "/SYM64/": true,
	"__.SYMDEF": true, "__.SYMDEF SORTED": true, "__.SYMDEF_64": true, "__.SYMDEF_64 SORTED": true,
}

var (
	arMagic   = []byte("!<arch>\n")
	thinMagic = []byte("!<thin>\n")
)

// readAr parses a GNU, BSD or thin ar archive. Symbol tables and the long
// name table are not members.
func readAr(data []byte) ([]arMember, error) {
	thin := bytes.HasPrefix(data, thinMagic)
	if !thin && !bytes.HasPrefix(data, arMagic) {
		return nil, fmt.Errorf("not an ar archive")
	}
	var members []arMember
	var longNames []byte
	off := 8
	for off < len(data) {
		if off+60 > len(data) {
			return members, fmt.Errorf("truncated member header at offset %d", off)
		}
		h := data[off : off+60]
		if h[58] != '`' || h[59] != '\n' {
			return members, fmt.Errorf("bad member header at offset %d", off)
		}
		name := strings.TrimRight(string(h[0:16]), " ")
		size, err := strconv.ParseInt(strings.TrimSpace(string(h[48:58])), 10, 64)
		if err != nil || size < 0 {
			return members, fmt.Errorf("bad member size %q at offset %d", strings.TrimSpace(string(h[48:58])), off)
		}
		off += 60
		// Thin archives store only the symbol and name tables inline.
		inline := !thin || name == "/" || name == "//" || name == "/SYM64/"
		var body []byte
		if inline {
			if int64(len(data)-off) < size {
				return members, fmt.Errorf("member %q claims %d bytes, %d remain", name, size, len(data)-off)
			}
			body = data[off : off+int(size)]
		}
		if name == "//" {
			longNames = body
		}
		switch {
		case arSpecial[name] && inline && !bytes.HasPrefix(body, magicELF):
			// A table, not a member.
		case arSpecial[name] && inline: // a "table" that is an object is one
			members = append(members, arMember{Name: name, Data: body})
		case strings.HasPrefix(name, "#1/"): // BSD: the name follows the header
			n, err := strconv.Atoi(name[3:])
			if err != nil || n < 0 || n > len(body) {
				return members, fmt.Errorf("bad BSD long name %q", name)
			}
			m := arMember{Name: strings.TrimRight(string(body[:n]), "\x00"), Data: body[n:]}
			if !arSpecial[m.Name] || bytes.HasPrefix(m.Data, magicELF) {
				members = append(members, m)
			}
		case strings.HasPrefix(name, "/"): // GNU: offset into the long name table
			n, err := strconv.Atoi(name[1:])
			if err != nil || n < 0 || n >= len(longNames) {
				return members, fmt.Errorf("bad long name reference %q", name)
			}
			ln := string(longNames[n:])
			if i := strings.Index(ln, "/\n"); i >= 0 {
				ln = ln[:i]
			} else if i := strings.IndexByte(ln, '\n'); i >= 0 {
				ln = ln[:i]
			}
			m := arMember{Name: ln, Data: body}
			if thin {
				m.Path, m.Name = ln, filepath.Base(ln)
			}
			members = append(members, m)
		default:
			m := arMember{Name: strings.TrimSuffix(name, "/"), Data: body}
			if thin {
				m.Path = m.Name
			}
			members = append(members, m)
		}
		if inline {
			off += int(size)
			if off%2 == 1 {
				off++
			}
		}
	}
	return members, nil
}
