//go:build linux && (amd64 || arm64)

package prefault

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/dorisarm/dorisarm/internal/testproc"
)

// The assembly makes real system calls with the arguments in the right
// registers: getpid takes none, and write and close take three and one.
func TestSys3(t *testing.T) {
	getpid := map[string]uintptr{"amd64": 39, "arm64": 172}[runtime.GOARCH]
	if got := int(sys3(getpid, 0, 0, 0)); got != os.Getpid() {
		t.Fatalf("getpid through sys3 = %d, want %d", got, os.Getpid())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write := map[string]uintptr{"amd64": 1, "arm64": 64}[runtime.GOARCH]
	msg := []byte("through sys3")
	if n := int(sys3(write, w.Fd(), uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)))); n != len(msg) {
		t.Fatalf("write through sys3 = %d, want %d", n, len(msg))
	}
	if rc := int(sys3(sysClose, w.Fd(), 0, 0)); rc != 0 {
		t.Fatalf("close through sys3 = %d", rc)
	}
	got := make([]byte, 64)
	n, _ := r.Read(got)
	if string(got[:n]) != string(msg) {
		t.Fatalf("read %q back, want %q", got[:n], msg)
	}
	// An error comes back as a negative errno.
	if rc := int(sys3(sysClose, 1<<20, 0, 0)); rc != -int(syscall.EBADF) {
		t.Fatalf("close of a bad descriptor = %d, want %d", rc, -int(syscall.EBADF))
	}
}

// populate maps in the executable's read-only data whole. The test
// first drops that mapping's pages (MADV_DONTNEED: they are clean file
// pages, read back on the next touch), so that what is resident afterwards
// is populate's doing.
func TestPopulateExecutable(t *testing.T) {
	if !populateSupported() {
		t.Skip("madvise does not map pages in here (before Linux 5.14, or under qemu-user)")
	}
	start, end := rodata(t)
	if err := madvise(start, end-start, syscall.MADV_DONTNEED); err != nil {
		t.Fatal("dropping the pages:", err)
	}
	before := testproc.Resident(t, start)
	populate()
	after := testproc.Resident(t, start)
	size := int(end-start) >> 10
	t.Logf("read-only data: %d kB; resident %d kB after dropping, %d kB after populate", size, before, after)
	if before > size/2 {
		t.Fatalf("%d of %d kB stayed resident after MADV_DONTNEED: cannot tell what populate does", before, size)
	}
	if after < size*9/10 {
		t.Errorf("populate left %d of %d kB of this executable's read-only data unmapped", size-after, size)
	}
}

// rodata returns the executable's read-only, not executable mapping.
func rodata(t *testing.T) (uintptr, uintptr) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[1] == "r--p" && strings.HasPrefix(strings.Join(f[5:], " "), exe) {
			lo, hi, _ := strings.Cut(f[0], "-")
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad line %q", l)
			}
			return uintptr(s), uintptr(e)
		}
	}
	t.Fatalf("no read-only mapping of %s in /proc/self/maps", exe)
	return 0, 0
}

func madvise(start, n uintptr, advice int) error {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, start, n, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}

// populateSupported says whether madvise maps pages in when asked: a
// kernel before 5.14 refuses the advice, and qemu-user accepts any advice
// and does nothing.
func populateSupported() bool {
	page := os.Getpagesize()
	b, err := syscall.Mmap(-1, 0, page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return false
	}
	defer syscall.Munmap(b)
	if syscall.Madvise(b, madvPopulateWrite) != nil {
		return false
	}
	vec := []byte{0}
	_, _, e := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(page), uintptr(unsafe.Pointer(&vec[0])))
	return e == 0 && vec[0]&1 == 1
}

// The package's arm64 assembly and tests, run under qemu-aarch64: the
// system calls go through qemu, which does not carry out madvise, so the
// tests that need it skip.
func TestArm64(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-builds the tests")
	}
	if runtime.GOARCH == "arm64" {
		t.Skip("runs natively")
	}
	qemu, err := exec.LookPath("qemu-aarch64")
	if err != nil {
		t.Skip("no qemu-aarch64 (make deps)")
	}
	bin := filepath.Join(t.TempDir(), "prefault.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c for arm64: %v\n%s", err, out)
	}
	out, err := exec.Command(qemu, bin, "-test.v", "-test.run", "TestSys3|TestSelfSegments|TestHeapRange|TestPopulate").CombinedOutput()
	if err != nil {
		t.Fatalf("the arm64 tests under qemu: %v\n%s", err, out)
	}
	for _, name := range []string{"TestSys3", "TestSelfSegments", "TestHeapRange"} {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass under qemu:\n%s", name, out)
		}
	}
}

// populate maps in heapBytes of heap from heapMark on, or up to the end of
// its mapping: far past what this test binary has allocated, the pages are
// resident. (Checked at once, with the collector off: the runtime's
// scavenger may hand free pages back to the system later.)
func TestPopulateHeap(t *testing.T) {
	if !populateSupported() {
		t.Skip("madvise does not map pages in here (before Linux 5.14, or under qemu-user)")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	vec := make([]byte, (1<<20)/os.Getpagesize())
	start, end := populate()
	if start == end {
		t.Fatalf("no writable anonymous mapping holds heapMark (%p)", heapMark)
	}
	tail := max(start, end-1<<20) // the last megabyte
	vec = vec[:(end-tail)/uintptr(os.Getpagesize())]
	if _, _, e := syscall.Syscall(syscall.SYS_MINCORE, tail, end-tail, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore [%#x, %#x): %v", tail, end, e)
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	t.Logf("heap range [%#x, %#x), %d kB; %d of the last %d pages resident", start, end, (end-start)>>10, in, len(vec))
	if in != len(vec) {
		t.Errorf("%d of the %d pages at the end of the heap range are not resident", len(vec)-in, len(vec))
	}
}
