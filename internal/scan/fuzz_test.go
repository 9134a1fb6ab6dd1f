package scan

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dorisarm/dorisarm/internal/isa"
)

// tinyELF is a minimal aarch64 shared object: one R+X PT_LOAD holding an
// SVE word (cntd x0) and RET, and a PT_DYNAMIC that names a library and a
// GLIBC_2.34 version need. No section headers (as sstrip leaves it).
func tinyELF() []byte {
	b := make([]byte, 0x200)
	le := binary.LittleEndian
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], 3)   // ET_DYN
	le.PutUint16(b[18:], 183) // EM_AARCH64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[24:], 0x100) // entry
	le.PutUint64(b[32:], 64)    // phoff
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[54:], 56)
	le.PutUint16(b[56:], 2)
	ph := func(i int, typ, flags uint32, off, size uint64) {
		p := b[64+i*56:]
		le.PutUint32(p, typ)
		le.PutUint32(p[4:], flags)
		le.PutUint64(p[8:], off)
		le.PutUint64(p[16:], off)
		le.PutUint64(p[24:], off)
		le.PutUint64(p[32:], size)
		le.PutUint64(p[40:], size)
		le.PutUint64(p[48:], 0x10000)
	}
	ph(0, 1, 5, 0, 0x200)               // PT_LOAD R+X, the whole file
	ph(1, 2, 6, 0x140, 0x60)            // PT_DYNAMIC
	le.PutUint32(b[0x100:], 0x04e0e3e0) // cntd x0
	le.PutUint32(b[0x104:], 0xd65f03c0) // ret
	// .dynstr at 0x1a0: "\0libz.so.1\0libc.so.6\0GLIBC_2.34\0"
	strs := "\x00libz.so.1\x00libc.so.6\x00GLIBC_2.34\x00"
	copy(b[0x1a0:], strs)
	dyn := [][2]uint64{{1, 1}, {5, 0x1a0}, {10, uint64(len(strs))}, {0x6ffffffe, 0x180}, {0x6fffffff, 1}, {0, 0}}
	for i, d := range dyn {
		le.PutUint64(b[0x140+i*16:], d[0])
		le.PutUint64(b[0x148+i*16:], d[1])
	}
	// Verneed at 0x180: version 1, 1 aux, file "libc.so.6", aux at +16.
	v := b[0x180:]
	le.PutUint16(v, 1)
	le.PutUint16(v[2:], 1)
	le.PutUint32(v[4:], 11)
	le.PutUint32(v[8:], 16)
	le.PutUint32(v[16+8:], 21) // name GLIBC_2.34
	return b
}

// TestTinyELFLoaderView: without section headers the code, the needed
// library and the glibc version come from the program headers alone.
func TestTinyELFLoaderView(t *testing.T) {
	a := analyzeELF("tiny.so", tinyELF(), policy(t, "kunpeng920"), isa.Default)
	if a.file.Features["sve"] != 1 || len(a.file.Needed) != 1 || a.file.Needed[0] != "libz.so.1" || a.file.GlibcMax != "2.34" {
		t.Errorf("%+v %+v", a.file, a.findings)
	}
}

func fuzzWalker() *walker {
	return &walker{opts: Options{MaxDepth: 4, MaxBytes: 1 << 24, MaxEntries: 1000, MaxMember: 1 << 22}, table: isa.Default,
		ctx: context.Background(), jobs: make(chan job, 1024), rep: &Report{}, seen: map[string]bool{}}
}

func drain(w *walker, f func()) {
	done := make(chan bool)
	go func() {
		for j := range w.jobs {
			w.analyze(j)
		}
		done <- true
	}()
	f()
	close(w.jobs)
	<-done
}

// walkerSeeds are the hostile shapes of issue 16, small.
func walkerSeeds() [][]byte {
	var seeds [][]byte
	seeds = append(seeds, []byte("PK\x03\x04"), []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"))
	elf := tinyELF()
	seeds = append(seeds, elf, oldGNUSparse("lib/x.so", elf), zipSharedStream(8, elf), thinArchive("../../dev/zero", "x.o"))
	seeds = append(seeds, zipBomb(elf, 64, 3, 1<<63-33, 0), zipBomb(elf, 64, 3, 0, 1<<63), manyEntries(20, 4))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: 'A', Name: "v.so", Size: int64(len(elf)), Format: tar.FormatGNU})
	tw.Write(elf)
	tw.Close()
	seeds = append(seeds, buf.Bytes())
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(elf)
	zw.Close()
	seeds = append(seeds, gz.Bytes())
	return seeds
}

func FuzzWalkMemory(f *testing.F) {
	for _, s := range walkerSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		w := fuzzWalker()
		drain(w, func() { w.memory(data, "fuzz", 0, nil) })
	})
}

// memStore serves one content for every digest: layers and manifests are
// the fuzzer's (manifests then fail their digest check, layers are scanned
// and then fail theirs).
type memStore struct{ b []byte }

func (s memStore) open(v1.Hash) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(s.b)), nil
}

func FuzzOCINode(f *testing.F) {
	d := `{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:` + string(bytes.Repeat([]byte("ab"), 32)) + `","size":3}`
	f.Add([]byte(`{"schemaVersion":2,"manifests":[`+d+`]}`), tinyELF())
	f.Add([]byte(`{"schemaVersion":2,"layers":[`+d+`,`+d+`]}`), zipSharedStream(4, tinyELF()))
	f.Add([]byte(`{"schemaVersion":2,"layers":[{"digest":"sha256:`+string(bytes.Repeat([]byte("cd"), 32))+`"}]}`), oldGNUSparse("x.so", tinyELF()))
	f.Add([]byte(`{"fsLayers":[{"blobSum":"sha256:00"}]}`), []byte{})
	f.Fuzz(func(t *testing.T, manifest, blob []byte) {
		w := fuzzWalker()
		drain(w, func() { w.node(memStore{blob}, manifest, "", "oci:fuzz", 0, map[string]bool{}) })
	})
}

func FuzzGuards(f *testing.F) {
	f.Add([]byte{0x10, 0x62, 0x5f, 0x39, 0x70, 0x00, 0x00, 0x34, 0x41, 0xfc, 0xe0, 0x88, 0xc0, 0x03, 0x5f, 0xd6}, uint16(8))
	f.Fuzz(func(t *testing.T, code []byte, at uint16) {
		g := newGuardIndex(code, 0x1000)
		addr := 0x1000 + uint64(at)&^3
		g.guarded(addr)
		g.probe(addr)
		g.refs(map[uint64]*fnRefs{addr: {}})
	})
}
