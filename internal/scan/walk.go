package scan

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"cmp"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/dorisarm/dorisarm/internal/fault"
	"github.com/dorisarm/dorisarm/internal/isa"
)

// Options bound a scan.
type Options struct {
	MaxDepth   int   // archive nesting (a jar in a tar.gz in a directory is depth 2)
	MaxBytes   int64 // bytes decompressed or read out of archives, in all
	MaxEntries int   // archive entries, in all
	MaxMember  int64 // bytes of one member read into memory
	// MaxWindow bounds the decompression memory (zstd windows, xz and lzma
	// dictionaries) held by all open decompressors at once: a stream
	// inside another adds to what the outer ones hold. A stream that
	// needs more is an unreadable finding.
	MaxWindow int64
	Workers   int // ELF analyses at once (default GOMAXPROCS)
	// RequireTargetFlags makes the flag read-back's warnings (lost tuning,
	// unrecorded or unresolved flags) violations.
	RequireTargetFlags bool
	// Origins attributes each flag record to the build that compiled it,
	// the tree's own or a third-party package's: lost tuning in the tree's
	// own records is then an error unless accepted (the build's scan
	// gate). nil: records are not told apart.
	Origins *Origins
	// Digests keeps the digest of every flag record read in
	// Report.Digests (a package's install scan, for Origins).
	Digests bool
	Allow   []Exception
	// Insecure allows plain-HTTP registries that are not on loopback.
	Insecure bool
	// RegistryStall bounds how long a registry may send nothing (0: the
	// registry package's default; see registry.Options.Stall).
	RegistryStall time.Duration
	// RegistryMinRate is the slowest average a registry read may have, in
	// bytes per second (0: the registry package's default).
	RegistryMinRate int64
	// RequireCode makes an input that holds files but nothing the scanner
	// judges (text, data, an archive of them) bad input, as an empty one
	// always is: nothing was checked, which is not clean. dorisarm scan
	// sets it; the build's checks of what a package installed (headers,
	// pkg-config files) and of a stage do not.
	RequireCode bool
}

// DefaultOptions are generous for real Doris output (doris_be with its
// debug information is 2-3 GB) and stop archive bombs on a small machine:
// members over 64 MiB are spooled to a temporary file and mapped, so memory
// stays bounded whatever the sizes; --max-member bounds that file and
// --max-bytes the work. Decompressors hold at most 1 GiB in all
// (--max-window): two nested streams made with zstd --long=29 (512 MiB
// windows), or xz -9 (64 MiB dictionaries) nested as deep as --max-depth.
// gzip (32 KiB) and bzip2 (under 4 MiB) windows are not counted.
func DefaultOptions() Options {
	return Options{MaxDepth: 8, MaxBytes: 32 << 30, MaxEntries: 1_000_000, MaxMember: 4 << 30, MaxWindow: 1 << 30}
}

// ErrInput is a scan input that does not exist or cannot be opened (bad usage).
var ErrInput = fault.Input(errors.New("scan input"))

type kind int

const (
	kOther kind = iota
	kELF
	kExe // PE or Mach-O
	kAr
	kZip
	kTar
	kGzip
	kZstd
	kBzip2
	kXz
	kLzma
	kOpaque // a format not looked inside (opaqueFormats)
)

// sniff identifies content by its first bytes.
func sniff(b []byte) kind {
	switch {
	case bytes.HasPrefix(b, magicELF):
		return kELF
	case bytes.HasPrefix(b, arMagic), bytes.HasPrefix(b, thinMagic):
		return kAr
	case bytes.HasPrefix(b, []byte("PK\x03\x04")), bytes.HasPrefix(b, []byte("PK\x05\x06")):
		return kZip
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return kGzip
	case bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}), zstdSkippable(b):
		return kZstd
	case bytes.HasPrefix(b, []byte("BZh")):
		return kBzip2
	case bytes.HasPrefix(b, xzMagic):
		return kXz
	case len(b) >= 262 && string(b[257:262]) == "ustar", tarHeader(b):
		return kTar
	}
	if _, _, ok := otherFormat(b); ok {
		return kExe
	}
	if _, ok := opaque(b); ok {
		return kOpaque
	}
	if lzmaHeader(b) && lzmaDecodes(b) {
		return kLzma
	}
	return kOther
}

// sniffLen is how much of a file identifies it.
const sniffLen = 512

type job struct {
	path  string
	data  []byte
	unmap func()
	jar   *jarInfo
	keep  *sync.WaitGroup // held while data points into a mapped file
}

type jarInfo struct {
	path    string
	mu      sync.Mutex
	natives []native
}

type native struct {
	entry, format, machine string
}

type walker struct {
	opts   Options
	pol    *Policy
	table  func() *isa.Table
	ctx    context.Context
	jobs   chan job
	mu     sync.Mutex
	rep    *Report
	bytes  int64
	ents   int
	over   bool
	window int64 // decompression memory reserved by open streams (reserveWindow)
	jars   []*jarInfo
	root   string // the resolved directory of the current input: thin-archive members stay inside it
	seen   map[string]bool
	// digests are the flag records' digests read (Options.Digests).
	digests map[string]bool
	judged  int // programs, objects and jars found to judge (examined)
	noted   int // findings of the walk itself (add; examined)
}

// Scan scans inputs — directories, files (ELF, ar, tar, tar.gz, tar.zst, zip,
// jar…), oci:DIR layouts and registry references — against a policy (nil:
// report only).
func Scan(ctx context.Context, inputs []string, pol *Policy, opts Options) (*Report, error) {
	d := DefaultOptions()
	if opts.MaxDepth <= 0 {
		opts.MaxDepth = d.MaxDepth
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = d.MaxBytes
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = d.MaxEntries
	}
	if opts.MaxMember <= 0 {
		opts.MaxMember = d.MaxMember
	}
	if opts.MaxWindow <= 0 {
		opts.MaxWindow = d.MaxWindow
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if pol != nil && (opts.RequireTargetFlags != pol.RequireFlags || opts.Origins != pol.origins || opts.Digests != pol.keepDigests) {
		p := *pol
		p.RequireFlags, p.origins, p.keepDigests = opts.RequireTargetFlags, opts.Origins, opts.Digests
		pol = &p
	}
	w := &walker{opts: opts, pol: pol, table: isa.Default, ctx: ctx, jobs: make(chan job), rep: &Report{Inputs: inputs, Policy: pol}, digests: map[string]bool{}}
	if pol != nil {
		w.rep.Target = pol.Target
	}
	var ins []resolved
	for _, in := range inputs {
		r, err := resolveInput(in)
		if err != nil {
			return nil, err
		}
		ins = append(ins, r)
	}
	var wg sync.WaitGroup
	for i := 0; i < opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			debug.SetPanicOnFault(true) // see analyze
			for j := range w.jobs {
				w.analyze(j)
			}
		}()
	}
	var inputErr error
	for _, in := range ins {
		before, files := w.examined(), w.files()
		if err := w.input(in); err != nil {
			inputErr = err
			break
		}
		// Nothing to report is not the same as nothing wrong; with
		// RequireCode, files that are none of what the scanner judges
		// (text, images, data) are nothing checked either.
		if read := w.files() - files; w.examined() == before && (read == 0 || opts.RequireCode) {
			inputErr = fmt.Errorf("%w %s: %s", ErrInput, in.arg, in.kind.nothing(read))
			break
		}
	}
	close(w.jobs)
	wg.Wait()
	if inputErr != nil {
		return nil, inputErr
	}
	for _, j := range w.jars {
		w.jniCoverage(j)
	}
	w.finish()
	return w.rep, nil
}

// recoverFault, deferred, recovers a panic from a fault reading memory (a
// mapped file that shrank, with debug.SetPanicOnFault) and calls report;
// any other panic goes on.
func recoverFault(report func()) {
	r := recover()
	if r == nil {
		return
	}
	if !isFault(r) {
		panic(r)
	}
	report()
}

// isFault says whether a recovered panic is a fault reading memory: with
// debug.SetPanicOnFault, its value has the faulting address.
func isFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}

// examined counts what the walk found to judge and its own findings so far
// (not the analyses', which may come in while a later input is walked): an
// input that adds neither had nothing in it the scanner judges, whatever
// other files it held.
func (w *walker) examined() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.judged + w.noted
}

// files counts the files read so far, archive members included.
func (w *walker) files() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rep.Summary.Files
}

// send hands a program or object to the analysis: something judged.
func (w *walker) send(j job) {
	w.mu.Lock()
	w.judged++
	w.mu.Unlock()
	w.jobs <- j
}

// add records findings of the walk itself (an unreadable file, a link out,
// an opaque format): they count as something examined in the input being
// walked.
func (w *walker) add(fs ...Finding) {
	w.mu.Lock()
	w.rep.Findings = append(w.rep.Findings, fs...)
	w.noted += len(fs)
	w.mu.Unlock()
}

// found records findings of an analysis, which runs on a worker while the
// walk goes on (perhaps into the next input): its job was counted when it
// was sent.
func (w *walker) found(fs ...Finding) {
	w.mu.Lock()
	w.rep.Findings = append(w.rep.Findings, fs...)
	w.mu.Unlock()
}

func (w *walker) analyze(j job) {
	defer func() {
		if j.unmap != nil {
			j.unmap()
		}
		if j.keep != nil {
			j.keep.Done()
		}
	}()
	// A mapped file that shrinks while it is read faults; with
	// SetPanicOnFault that is a panic, reported here as an unreadable file.
	defer recoverFault(func() { w.found(unreadable(j.path, changedDetail)) })
	if format, machine, ok := otherFormat(j.data); ok {
		w.mu.Lock()
		w.rep.Files = append(w.rep.Files, File{Path: j.path, Format: format, Machine: machine, Size: int64(len(j.data)), Scope: w.pol.scopeOf(j.path, "")})
		w.mu.Unlock()
		w.native(j, format, machine)
		return
	}
	a := analyzeELF(j.path, j.data, w.pol, w.table)
	if a.file.Path != "" {
		// A file that does not ship is judged without the deployment
		// checks; its properties (glibc needs, OpenSSL) are still told.
		a.file.Scope = w.pol.scopeOf(a.file.Path, a.file.Type)
		a.findings = slices.DeleteFunc(a.findings, func(f Finding) bool { return !w.pol.Judges(f.Kind, a.file.Scope) })
	}
	if j.jar != nil {
		// A jar's native libraries are other projects' builds: how they
		// were compiled is theirs, judged by the ISA checks alone.
		a.file.Flags, a.digests = nil, nil
		a.findings = slices.DeleteFunc(a.findings, func(f Finding) bool { return isFlagKind(f.Kind) })
		// Other platforms' libraries belong in a multi-platform jar; the jar
		// as a whole is judged by its coverage of the target.
		for i := range a.findings {
			if a.findings[i].Kind == KindForeignArch {
				a.findings[i].Severity = SevInfo
				a.findings[i].Detail = "native library for another platform inside a jar (" + a.file.Machine + ")"
			}
		}
	}
	w.mu.Lock()
	if a.file.Path != "" {
		w.rep.Files = append(w.rep.Files, a.file)
	}
	w.rep.Findings = append(w.rep.Findings, a.findings...)
	for _, d := range a.digests {
		w.digests[d] = true
	}
	w.mu.Unlock()
	if a.file.Path != "" {
		w.native(j, "elf", a.file.Machine)
	}
}

func (w *walker) native(j job, format, machine string) {
	if j.jar == nil {
		if w.pol != nil && format != "elf" {
			w.found(Finding{Kind: KindForeignArch, Severity: SevError, Path: j.path,
				Detail: fmt.Sprintf("%s %s image in a Linux %s build", format, machine, w.pol.ISA)})
		}
		return
	}
	j.jar.mu.Lock()
	j.jar.natives = append(j.jar.natives, native{j.path, format, machine})
	j.jar.mu.Unlock()
}

// jniCoverage: a jar with native libraries must have one for the target.
func (w *walker) jniCoverage(j *jarInfo) {
	if w.pol == nil || len(j.natives) == 0 {
		return
	}
	var platforms []string
	seen := map[string]bool{}
	for _, n := range j.natives {
		if n.format == "elf" && n.machine == w.pol.ISA {
			return
		}
		osName := map[string]string{"elf": "linux", "pe": "windows", "macho": "darwin"}[n.format]
		p := osName + "-" + n.machine
		if !seen[p] {
			seen[p] = true
			platforms = append(platforms, p)
		}
	}
	sort.Strings(platforms)
	w.add(Finding{Kind: KindJNIMissing, Severity: SevError, Path: j.path, Count: len(j.natives),
		Detail: fmt.Sprintf("ships native libraries for %s but none for linux-%s; the JVM will fail to load it on %s (use a release of the library with a linux-%s build)",
			strings.Join(platforms, ", "), w.pol.ISA, w.pol.Target, w.pol.ISA)})
}

// budget reserves an entry and n bytes of the scan's limits; false when
// they are spent.
func (w *walker) budget(path string, n int64) bool { return w.reserve(path, 1, n) }

// reserve reserves ents entries and n bytes of the scan's limits; false
// when they are spent (then for the rest of the scan). A negative n (a
// size that did not fit an int64) is more than any limit.
func (w *walker) reserve(path string, ents uint64, n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n < 0 {
		n = math.MaxInt64
	}
	if !w.over && n <= w.opts.MaxBytes-w.bytes && ents <= uint64(max(w.opts.MaxEntries-w.ents, 0)) {
		w.bytes += n
		w.ents += int(ents)
		return true
	}
	if !w.over {
		w.over = true
		w.rep.Findings = append(w.rep.Findings, unreadable(path, fmt.Sprintf(
			"scan limits reached (%d bytes out of archives, %d entries; limits %d and %d): an archive bomb, or raise --max-bytes/--max-entries",
			satAdd(uint64(w.bytes), uint64(n)), satAdd(uint64(w.ents), ents), w.opts.MaxBytes, w.opts.MaxEntries)))
	}
	return false
}

// charge counts n bytes of work (not output) against --max-bytes; false,
// counting nothing, when that would pass the limit.
func (w *walker) charge(n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n < 0 || n > w.opts.MaxBytes-w.bytes {
		return false
	}
	w.bytes += n
	return true
}

// release gives back ents entries reserve took for memory held for a while
// (a zip's central directory), not for work done.
func (w *walker) release(ents uint64) {
	w.mu.Lock()
	w.ents -= int(ents)
	w.mu.Unlock()
}

// satAdd is a+b, or the largest uint64 when that overflows.
func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

func (w *walker) input(in resolved) error {
	w.root = in.root
	switch in.kind {
	case inLayout:
		return w.ociLayout(in.arg, in.path)
	case inRemote:
		return w.remote(in.arg, in.path)
	case inFile:
		return w.file(in.path, in.arg, 0, nil)
	}
	return filepath.WalkDir(in.path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			w.add(unreadable(p, err.Error()))
			return nil
		}
		if w.ctx.Err() != nil {
			return w.ctx.Err()
		}
		rel, _ := filepath.Rel(in.path, p)
		if d.Type()&fs.ModeSymlink != 0 {
			w.link(in.path, p, filepath.ToSlash(rel))
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return w.file(p, filepath.ToSlash(rel), 0, nil)
	})
}

// link notes a link of a scanned directory that resolves outside it: what
// it points to is not part of the scan, and the report says so. A link
// inside needs nothing: its target is scanned where it is.
func (w *walker) link(dir, p, name string) {
	target, err := os.Readlink(p)
	if err != nil {
		return
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return // dangling, or a loop: nothing there to scan
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil || within(root, real) {
		return
	}
	w.add(Finding{Kind: KindLinkOutside, Severity: SevInfo, Path: name, Feature: target,
		Detail: fmt.Sprintf("link to %s, outside the scanned tree: its target was not scanned", real)})
}

// file scans a file on disk: it is mapped into memory when it is an ELF, ar
// or zip, streamed when it is compressed or a tar.
func (w *walker) file(fsPath, name string, depth int, jar *jarInfo) error {
	// Non-blocking: a FIFO swapped in after the walk saw a file must not hang the scan.
	f, err := os.OpenFile(fsPath, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		w.add(unreadable(name, err.Error()))
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		w.add(unreadable(name, "not a regular file; not read"))
		return nil
	}
	head := make([]byte, sniffLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		// A file that cannot be read is not a clean file (it used to count as one).
		w.add(unreadable(name, "reading it failed: "+err.Error()))
		return nil
	}
	head = head[:n]
	k := sniff(head)
	zipAfter := false // a program with a zip after it
	switch {
	case k == kOther && zipAtEnd(f, st.Size()):
		k = kZip // an executable jar, a self-extracting zip
	case k == kELF || k == kExe:
		zipAfter = zipAtEnd(f, st.Size())
	}
	w.mu.Lock()
	w.rep.Summary.Files++
	w.rep.Summary.Bytes += st.Size()
	w.mu.Unlock()
	switch k {
	case kOther:
		return nil
	case kOpaque:
		if !isBitcode(head) {
			w.opaque(name, head)
			return nil
		}
		// LLVM bitcode: its triple is read from the whole file, below.
	case kTar, kGzip, kZstd, kBzip2, kXz, kLzma:
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			w.add(unreadable(name, err.Error()))
			return nil
		}
		if w.stream(bufio.NewReaderSize(f, 1<<20), name, depth, k, jar) == 0 {
			return nil
		}
		// A zip after the tar or lzma stream, too long to hold while
		// reading: read where it lies, as a zip after other content.
		k, name = kZip, name+"(trailing)"
	}
	data, unmap, err := mapFile(f)
	if err != nil {
		w.add(unreadable(name, err.Error()))
		return nil
	}
	// The archive readers below read the mapping on this goroutine.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer recoverFault(func() { w.add(unreadable(name, changedDetail)) })
	switch k {
	case kELF, kExe:
		if zipAfter {
			// A self-extracting program, or a jar behind an ELF launcher:
			// unzip and the JVM open the zip, whose members it unpacks or
			// loads. Members are decompressed copies; the mapping stays
			// the analysis's.
			w.zip(data, name, depth)
		}
		w.send(job{path: name, data: data, unmap: unmap, jar: jar})
	case kAr:
		// Members are slices of the mapping: unmap once their analyses are done.
		keep := &sync.WaitGroup{}
		w.ar(data, name, filepath.Dir(fsPath), depth, jar, keep)
		go func() { keep.Wait(); unmap() }()
	case kZip:
		w.zip(data, name, depth) // members are decompressed copies
		unmap()
	case kOpaque:
		w.opaque(name, data)
		unmap()
	}
	return nil
}

// mappings are the address ranges of files mapped by mapFile: only those may
// have pages dropped after scanning, or be read from their file.
var mappings sync.Map // start address → mapping

type mapping struct {
	n  int // length
	fd int // a descriptor of the file, open while it is mapped
}

// mappedAt returns the mapping that holds all of b: its file's descriptor
// and the offset of b in it.
func mappedAt(b []byte) (fd int, off int64, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	mappings.Range(func(k, v any) bool {
		start, m := k.(uintptr), v.(mapping)
		if p >= start && p+uintptr(len(b)) <= start+uintptr(m.n) {
			fd, off, ok = m.fd, int64(p-start), true
			return false
		}
		return true
	})
	return fd, off, ok
}

func mapped(b []byte) bool {
	_, _, ok := mappedAt(b)
	return ok
}

func mapFile(f *os.File) ([]byte, func(), error) {
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 {
		return []byte{}, func() {}, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		// Not mappable (a pipe, a special file): read it.
		b, rerr := io.ReadAll(io.NewSectionReader(f, 0, size))
		return b, func() {}, rerr
	}
	// The mapping keeps a descriptor of its own, for reads (see reader):
	// the caller may close f before the mapping's last reader is done.
	fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		fd = ^uintptr(0) // none: the classifier reads the mapping
	}
	start := uintptr(unsafe.Pointer(&data[0]))
	mappings.Store(start, mapping{n: len(data), fd: int(fd)})
	// Unmapping a large file takes a while (its page tables go, and other
	// CPUs are told): it happens beside what follows, since nothing reads
	// the mapping any more.
	return data, func() {
		mappings.Delete(start)
		go func() {
			_ = syscall.Munmap(data)
			if int(fd) >= 0 {
				_ = syscall.Close(int(fd))
			}
		}()
	}, nil
}

// memory scans content already in memory (an archive member). keep, when
// set, is held by every analysis of data that points into a mapped file.
func (w *walker) memory(data []byte, name string, depth int, jar *jarInfo, keep ...*sync.WaitGroup) {
	var k *sync.WaitGroup
	if len(keep) > 0 {
		k = keep[0]
	}
	if depth > w.opts.MaxDepth {
		w.add(unreadable(name, fmt.Sprintf("nested deeper than %d archives; not scanned (raise --max-depth)", w.opts.MaxDepth)))
		return
	}
	switch sniff(data) {
	case kELF, kExe:
		if zipAtEnd(bytes.NewReader(data), int64(len(data))) {
			w.zip(data, name, depth) // a program with a zip after it, as in file
		}
		if k != nil {
			k.Add(1)
		}
		w.send(job{path: name, data: data, jar: jar, keep: k})
	case kOther:
		if zipAtEnd(bytes.NewReader(data), int64(len(data))) {
			w.zip(data, name, depth) // an executable jar, a self-extracting zip
		}
	case kAr:
		w.ar(data, name, "", depth, jar, k)
	case kZip:
		w.zip(data, name, depth)
	case kTar, kGzip, kZstd, kBzip2, kXz, kLzma:
		if w.stream(bufio.NewReader(bytes.NewReader(data)), name, depth, sniff(data), jar) > 0 {
			w.zip(data, name+"(trailing)", depth) // too long to hold again: read where it lies
		}
	case kOpaque:
		w.opaque(name, data)
	}
}

func (w *walker) ar(data []byte, name, dir string, depth int, jar *jarInfo, keep *sync.WaitGroup) {
	members, err := readAr(data)
	if err != nil {
		w.add(unreadable(name, "malformed ar archive: "+err.Error()))
	}
	for _, m := range members {
		mpath := name + "(" + m.Name + ")"
		if m.Data == nil && m.Path != "" {
			if dir == "" {
				w.add(unreadable(mpath, "thin archive member outside the file system; cannot be followed"))
				continue
			}
			w.thinMember(m.Path, mpath, dir, depth, jar)
			continue
		}
		if !w.budget(mpath, int64(len(m.Data))) {
			return
		}
		w.memory(m.Data, mpath, depth+1, jar, keep)
	}
}

// thinMember reads a thin archive's member: a path relative to the archive
// that must resolve, links followed, to a regular file inside the scanned
// tree and within --max-member.
func (w *walker) thinMember(member, mpath, dir string, depth int, jar *jarInfo) {
	p := member
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		w.add(unreadable(mpath, "thin archive member: "+err.Error()))
		return
	}
	if w.root == "" || !within(w.root, real) {
		w.add(unreadable(mpath, fmt.Sprintf("thin archive member %s resolves outside the scanned tree (%s); not read", member, w.root)))
		return
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		w.add(unreadable(mpath, "thin archive member: "+err.Error()))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		w.add(unreadable(mpath, fmt.Sprintf("thin archive member %s is not a regular file; not read", member)))
		return
	}
	if st.Size() > w.opts.MaxMember {
		w.add(unreadable(mpath, fmt.Sprintf("thin archive member of %d bytes exceeds --max-member (%d); not scanned", st.Size(), w.opts.MaxMember)))
		return
	}
	if !w.budget(mpath, st.Size()) {
		return
	}
	data, unmap, err := mapFile(f)
	if err != nil {
		w.add(unreadable(mpath, "thin archive member: "+err.Error()))
		return
	}
	w.owned(data, unmap, mpath, depth+1, jar)
}

func isJar(name string, zr *zip.Reader) bool {
	lower := strings.ToLower(name)
	for _, ext := range []string{".jar", ".war", ".ear", ".aar"} {
		if strings.HasSuffix(lower, ext) {
			return true
		}
	}
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "META-INF/") {
			return true
		}
	}
	return false
}

func (w *walker) zip(data []byte, name string, depth int) {
	// archive/zip reads the whole central directory into memory: its
	// entries count against --max-entries before it does, for as long as
	// the zip is open. Zips nested in it add up; the hundreds of jars side
	// by side in a Doris tree do not.
	n := zipEntryCount(data, uint64(w.opts.MaxEntries))
	if !w.reserve(name, n, 0) {
		return
	}
	defer w.release(n)
	if zipEndsDisagree(data) {
		w.add(unreadable(name, "zip whose zip64 end record names another central directory than its 32-bit one: readers list different entries (a zip made to hide some); not scanned, rebuild it"))
		return
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		w.add(unreadable(name, "malformed zip/jar: "+err.Error()))
		return
	}
	var jar *jarInfo
	if isJar(name, zr) {
		jar = &jarInfo{path: name}
		w.mu.Lock()
		w.jars = append(w.jars, jar) // judged: its native libraries must cover the target
		w.judged++
		w.mu.Unlock()
	}
	overlap := zipOverlaps(zr.File, int64(len(data)))
	var hold []byte // zipBehind's, for every entry
	for _, f := range zr.File {
		mpath := name + "!/" + f.Name
		if why, bad := overlap[f]; bad {
			w.add(unreadable(mpath, why))
			continue
		}
		if isZipDir(f) {
			w.zipDirectory(f, mpath, depth, jar)
			continue
		}
		if f.UncompressedSize64 > uint64(w.opts.MaxMember) {
			w.add(unreadable(mpath, fmt.Sprintf("member of %d bytes exceeds --max-member (%d); not scanned", f.UncompressedSize64, w.opts.MaxMember)))
			continue
		}
		if !w.zipEntry(f, mpath, depth, jar, &hold) {
			return
		}
	}
}

// stream handles a compressed stream or a tar, reading it once. It returns
// the size of what follows the tar's or lzma stream's end when that is
// too long to hold and ends with a zip (see afterEnd).
func (w *walker) stream(r *bufio.Reader, name string, depth int, k kind, jar *jarInfo) (long int64) {
	if depth > w.opts.MaxDepth {
		w.add(unreadable(name, fmt.Sprintf("nested deeper than %d archives; not scanned", w.opts.MaxDepth)))
		return
	}
	var inner io.Reader
	var closer func()
	var hold []byte // zipBehind's
	switch k {
	case kTar:
		// A tar's reader stops at its end; unzip and Java open a zip
		// after it (a jar appended to the tar), tar -i a second tar.
		w.tar(r, name, depth, jar)
		return w.afterEnd(r, name, depth, &hold)
	case kGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			w.add(unreadable(name, "malformed gzip: "+err.Error()))
			return
		}
		zr.Multistream(true)
		inner, closer = zr, func() { zr.Close() }
	case kBzip2:
		inner, closer = bzip2.NewReader(r), func() {}
	case kZstd, kXz, kLzma:
		open := map[kind]func(*bufio.Reader) (io.Reader, func(), error){kZstd: w.zstdReader, kXz: w.xzReader, kLzma: w.lzmaReader}[k]
		var err error
		if inner, closer, err = open(r); err != nil {
			w.add(unreadable(name, compressedError(err)))
			return
		}
	}
	defer closer()
	br := bufio.NewReaderSize(&limited{r: inner, w: w, name: name}, 1<<20)
	head, err := br.Peek(sniffLen)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		w.add(unreadable(name, compressedError(err)))
		return
	}
	inner2 := name
	for _, ext := range []string{".gz", ".zst", ".bz2", ".xz", ".lzma"} {
		inner2 = strings.TrimSuffix(inner2, ext)
	}
	switch sk := sniff(head); sk {
	case kTar:
		w.tar(br, name, depth+1, jar)
		if n := w.afterEnd(br, name+"!", depth+1, &hold); n > 0 { // after the tar, as above
			w.tooLong(name+"!(trailing)", n)
		}
	case kOpaque:
		if !isBitcode(head) {
			w.opaque(inner2+"!", head)
			break
		}
		if data, unmap, ok := w.slurp(br, inner2+"!"); ok {
			w.owned(data, unmap, inner2+"!", depth+1, jar)
		}
	case kOther:
		w.zipBehind(br, inner2+"!", depth+1, &hold)
	default:
		if data, unmap, ok := w.slurp(br, inner2+"!"); ok {
			w.owned(data, unmap, inner2+"!", depth+1, jar)
		}
	}
	// Read to the end: the decompressor checks its CRC there (and a
	// registry layer's digest is checked at the end of its stream).
	if _, err := io.Copy(io.Discard, br); err != nil {
		w.add(unreadable(name, compressedError(err)))
		return
	}
	if k == kLzma {
		// The lzma decoder stops at its stream's end and leaves what
		// follows (a jar appended to it, which unzip and Java open, a
		// second stream); the other decoders take it for a stream that
		// is not theirs (a finding).
		return w.afterEnd(r, name, depth, &hold)
	}
	return 0
}

// opaque reports content in a format the scan does not look inside: b is
// its start, or all of it for LLVM bitcode, whose modules' triples say
// which targets the machine code it becomes is for.
func (w *walker) opaque(name string, b []byte) {
	if !isBitcode(b) {
		detail, _ := opaque(b)
		w.add(unreadable(name, detail))
		return
	}
	triples, err := bitcodeTriples(b)
	switch {
	case errors.Is(err, errNoTriple):
		w.add(unreadable(name, "LLVM bitcode naming no target (a ThinLTO summary index, or a module without a triple): "+bitcodeNativeSay))
		return
	case err != nil:
		w.add(unreadable(name, "LLVM bitcode: "+bitcodeSay))
		return
	}
	for _, t := range triples {
		if w.pol != nil && !w.pol.NativeTriple(t) {
			w.add(Finding{Kind: KindForeignArch, Severity: SevError, Path: name,
				Detail: fmt.Sprintf("LLVM bitcode for %s (an LTO object) in a Linux %s build: it compiles to code for another target; rebuild it for %s", t, w.pol.ISA, w.pol.ISA)})
			return
		}
	}
	w.add(unreadable(name, "LLVM bitcode for "+strings.Join(triples, ", ")+": "+bitcodeNativeSay))
	w.bitcodeFlags(name, b)
}

// limited counts decompressed bytes against the scan's budget.
type limited struct {
	r    io.Reader
	w    *walker
	name string
	dead bool
}

func (l *limited) Read(p []byte) (int, error) {
	if l.dead {
		return 0, io.EOF
	}
	n, err := l.r.Read(p)
	if n > 0 {
		l.w.mu.Lock()
		l.w.bytes += int64(n)
		over := l.w.bytes > l.w.opts.MaxBytes
		l.w.mu.Unlock()
		if over {
			l.w.budget(l.name, 0) // records the finding once
			l.dead = true
			return n, io.EOF
		}
	}
	return n, err
}

// tarNoContent are the entry types whose data is not a file's content.
// Every other type is read: GNU tar extracts '7' (contiguous), old-GNU
// sparse ('S') and unknown types as regular files.
var tarNoContent = map[byte]bool{
	tar.TypeDir: true, tar.TypeSymlink: true, tar.TypeLink: true, tar.TypeChar: true, tar.TypeBlock: true, tar.TypeFifo: true,
	// Metadata archive/tar returns like an entry: git archive's PAX global
	// header ('g', holding the commit id), GNU volume labels ('V') and
	// dump directories ('D', a list of names).
	tar.TypeXGlobalHeader: true, 'V': true, 'D': true,
}

func (w *walker) tar(r io.Reader, name string, depth int, jar *jarInfo) {
	tr := tar.NewReader(r)
	var hold []byte // zipBehind's, for every member
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			w.add(unreadable(name, "malformed tar: "+err.Error()))
			return
		}
		if w.ctx.Err() != nil {
			return
		}
		if tarNoContent[h.Typeflag] {
			continue
		}
		mpath := name + "!/" + strings.TrimPrefix(h.Name, "./")
		if h.Size > w.opts.MaxMember {
			w.add(unreadable(mpath, fmt.Sprintf("member of %d bytes exceeds --max-member (%d); not scanned", h.Size, w.opts.MaxMember)))
			continue
		}
		br := bufio.NewReaderSize(tr, sniffLen)
		head, _ := br.Peek(sniffLen)
		k := sniff(head)
		w.mu.Lock()
		w.rep.Summary.Files++
		w.mu.Unlock()
		// Every member counts against --max-entries, and a sparse one's
		// size against --max-bytes before it is read: the tar reader
		// fills its holes with zeros, and a few bytes of tar can hold
		// terabytes of them.
		holes := int64(0)
		if sparse(h) {
			holes = h.Size
		}
		if !w.budget(mpath, holes) {
			return
		}
		if k == kOther {
			w.zipBehind(br, mpath, depth+1, &hold) // for a zip after other content
			continue
		}
		switch {
		case k == kOpaque && !isBitcode(head):
			w.opaque(mpath, head)
		case k == kTar, k == kGzip, k == kZstd, k == kBzip2, k == kXz, k == kLzma:
			if n := w.stream(br, mpath, depth+1, k, jar); n > 0 {
				w.tooLong(mpath+"(trailing)", n)
			}
		default:
			data, unmap, ok := w.slurpSized(br, mpath, h.Size)
			if !ok {
				return
			}
			if holes == 0 {
				w.mu.Lock()
				w.bytes += int64(len(data))
				w.mu.Unlock()
			}
			w.owned(data, unmap, mpath, depth+1, jar)
		}
	}
}

// sparse says whether a tar member is a sparse file (GNU's old format, or
// PAX records of GNU's later ones), whose holes the tar reader fills with
// zeros as it is read.
func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// compareFindings orders findings by path, kind, function and feature,
// then address (as a number) and detail: a total order, so a report is
// the same bytes however its files' parts were found (some come from map
// iterations, such as a section's data spans).
func compareFindings(a, b Finding) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Function, b.Function),
		strings.Compare(a.Feature, b.Feature), cmp.Compare(findingAddr(a.Address), findingAddr(b.Address)),
		strings.Compare(a.Address, b.Address), strings.Compare(a.Detail, b.Detail))
}

// findingAddr is a finding's address ("0x1f0") as a number; 0 for none.
func findingAddr(s string) uint64 {
	v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	return v
}

// finish sorts the report and fills in the summary.
func (w *walker) finish() {
	r := w.rep
	applyAllow(r, w.opts.Allow)
	sort.Slice(r.Files, func(i, j int) bool { return r.Files[i].Path < r.Files[j].Path })
	slices.SortStableFunc(r.Findings, compareFindings)
	s := &r.Summary
	s.ByKind, s.Machines, s.Features = map[string]int{}, map[string]int{}, map[string]int{}
	s.Guarded, s.Waived, s.AllowedByKind = map[string]int{}, map[string]int{}, map[string]int{}
	s.Warned, s.Scopes = map[string]int{}, map[string]int{}
	for _, f := range r.Files {
		if f.Format == "elf" {
			s.ELF++
		}
		s.Scopes[f.Scope]++
		s.Machines[f.Machine]++
		s.TextBytes += f.TextBytes
		for k, v := range f.Features {
			s.Features[k] += v
		}
		for k, v := range f.Guarded {
			s.Guarded[k] += v
		}
		if CompareVersions(f.GlibcMax, s.GlibcMax) > 0 && r.Policy.Judges(KindGlibc, f.Scope) {
			s.GlibcMax = f.GlibcMax
		}
		if CompareVersions(f.Glibcxx, s.GlibcxxMax) > 0 && r.Policy.Judges(KindGlibcxx, f.Scope) {
			s.GlibcxxMax = f.Glibcxx
		}
	}
	for _, f := range r.Findings {
		switch {
		case f.Kind == KindUnreadable:
			s.Unreadable++
		case f.Kind == KindLinkOutside:
			s.LinksOutside++
		}
		if f.Violation() {
			s.Violations++
			s.ByKind[f.Kind]++
		} else if f.Severity == SevWarning && f.Allowed == "" {
			s.Warned[f.Kind]++
		} else if f.Allowed != "" {
			s.Allowed++
			s.AllowedByKind[f.Kind]++
			if f.Kind == KindISA && !f.Guarded {
				s.Waived[f.Feature] += f.Count
			}
		}
	}
	if len(s.Warned) == 0 {
		s.Warned = nil
	}
	r.summarizeFlags()
	s.Clean = s.Violations == 0
	if w.opts.Digests {
		r.Digests = slices.Sorted(maps.Keys(w.digests))
	}
}
