package scan

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// windowError: a compressed stream needs more decompression memory (its
// zstd window or xz/lzma dictionary) than the budget has left.
type windowError struct {
	format           string
	need, held, max_ int64
	detail           string // the whole message, when set
}

func (e *windowError) Error() string {
	if e.detail != "" {
		return e.detail
	}
	s := fmt.Sprintf("%s stream needs a %s window (decompression memory)", e.format, size(e.need))
	if e.held > 0 {
		s += fmt.Sprintf(" on top of the %s its enclosing compressed streams hold", size(e.held))
	}
	return s + fmt.Sprintf(", over the limit of %s for all open streams: not decompressed (unpack it and scan the result, or raise --max-window)", size(e.max_))
}

func size(n int64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", (n+1023)>>10)
}

// reserveWindow takes n bytes of the decompression-memory budget
// (Options.MaxWindow), which all open decompressors share: nested streams
// add up.
func (w *walker) reserveWindow(format string, n int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.window+n > w.opts.MaxWindow {
		return &windowError{format: format, need: n, held: w.window, max_: w.opts.MaxWindow}
	}
	w.window += n
	return nil
}

func (w *walker) releaseWindow(n int64) {
	w.mu.Lock()
	w.window -= n
	w.mu.Unlock()
}

// ownDetail is an error whose message is the whole detail of its finding:
// a limit or a filter, not corrupt data.
type ownDetail interface {
	error
	ownDetail()
}

func (*windowError) ownDetail()  {}
func (xzFilterError) ownDetail() {}
func (xzWorkError) ownDetail()   {}

// compressedError is the detail of a finding for an error decompressing.
func compressedError(err error) string {
	var own ownDetail
	if errors.As(err, &own) {
		return own.Error()
	}
	return "corrupt compressed data: " + err.Error()
}

// lzmaReader decompresses a legacy .lzma stream; its dictionary (what the
// header says, or the data's size when smaller) is reserved first.
func (w *walker) lzmaReader(r *bufio.Reader) (io.Reader, func(), error) {
	h, err := r.Peek(13)
	if err != nil {
		return nil, nil, err
	}
	dict := int64(binary.LittleEndian.Uint32(h[1:]))
	need := dict
	if n := int64(binary.LittleEndian.Uint64(h[5:])); n >= 0 && n < need {
		need = n
	}
	need = max(need, lzma.MinDictCap)
	if err := w.reserveWindow("lzma", need); err != nil {
		return nil, nil, err
	}
	lr, err := lzma.ReaderConfig{DictCap: int(max(dict, lzma.MinDictCap))}.NewReader(r)
	if err != nil {
		w.releaseWindow(need)
		return nil, nil, err
	}
	return lr, func() { w.releaseWindow(need) }, nil
}

// xzReader decompresses xz. The decoder (github.com/ulikunitz/xz) takes
// each block's dictionary size from the block's header and allocates it,
// up to 4 GiB, with no limit of its own; so the compressed bytes pass
// through xzGuard, which reads every block header first and reserves its
// dictionary, and ends the stream with a windowError when it does not fit.
func (w *walker) xzReader(src *bufio.Reader) (io.Reader, func(), error) {
	pr, pw := io.Pipe()
	g := &xzGuard{w: w, src: src, out: pw}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(g.run())
	}()
	stop := func() {
		pr.CloseWithError(errors.New("xz stream no longer read"))
		<-done
		w.releaseWindow(g.held)
	}
	// The decoder reads its input a byte at a time: from a buffer, not the pipe.
	xr, err := xz.ReaderConfig{DictCap: lzma.MinDictCap}.NewReader(bufio.NewReaderSize(pr, 64<<10))
	if err != nil {
		stop()
		return nil, nil, err
	}
	return xr, stop, nil
}

// xzGuard copies an xz file from src to out, following its structure
// (streams, block headers, LZMA2 chunk headers, index, footer) without
// decompressing; anything it does not understand ends the copy with an
// error, so that no block header reaches the decoder unchecked.
type xzGuard struct {
	w    *walker
	src  *bufio.Reader
	out  io.Writer
	held int64 // window reserved: the largest dictionary so far
	n    int64 // bytes copied in the current block or index
}

var errXzStructure = errors.New("xz: the file's structure is not what the xz format says (corrupt or truncated)")

// peek reads n bytes (a header) without copying them yet.
func (g *xzGuard) peek(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := io.ReadFull(g.src, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// pass copies b, read by peek.
func (g *xzGuard) pass(b []byte) error {
	g.n += int64(len(b))
	_, err := g.out.Write(b)
	return err
}

// take copies n bytes and returns them (n is small: headers).
func (g *xzGuard) take(n int) ([]byte, error) {
	b, err := g.peek(n)
	if err != nil {
		return nil, err
	}
	return b, g.pass(b)
}

func (g *xzGuard) skip(n int64) error {
	m, err := io.CopyN(g.out, g.src, n)
	g.n += m
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (g *xzGuard) varint() (uint64, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		b, err := g.take(1)
		if err != nil {
			return 0, err
		}
		v |= uint64(b[0]&0x7f) << (7 * i)
		if b[0]&0x80 == 0 {
			return v, nil
		}
	}
	return 0, errXzStructure
}

func (g *xzGuard) run() error {
	for first := true; ; first = false {
		if !first { // stream padding, then another stream or the end
			for {
				b, err := g.src.Peek(4)
				if len(b) == 0 && err == io.EOF {
					return nil
				}
				if !bytes.Equal(b, []byte{0, 0, 0, 0}) {
					break
				}
				if _, err := g.take(4); err != nil {
					return err
				}
			}
		}
		h, err := g.take(12)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(h, xzMagic) {
			return errXzStructure
		}
		check := int64([]int{0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64}[h[7]&0x0f])
		if err := g.blocks(check); err != nil {
			return err
		}
	}
}

// blocks copies a stream's blocks, its index and its footer.
func (g *xzGuard) blocks(check int64) error {
	for {
		g.n = 0
		b, err := g.take(1)
		if err != nil {
			return err
		}
		if b[0] == 0 {
			return g.index()
		}
		// The header reaches the decoder only once its dictionary is reserved.
		rest, err := g.peek(int(b[0])*4 + 3)
		if err != nil {
			return err
		}
		dict, err := xzDict(append(b, rest...))
		if err != nil {
			return err
		}
		// The decoder allocates, and clears, a dictionary for every block:
		// that is work, counted against --max-bytes like decompressed data,
		// so that a stream of tiny blocks each declaring a large dictionary
		// ends at the limit instead of running for minutes.
		if !g.w.charge(dict) {
			return xzWorkError{dict: dict, limit: g.w.opts.MaxBytes}
		}
		if dict > g.held {
			if err := g.w.reserveWindow("xz", dict-g.held); err != nil {
				return err
			}
			g.held = dict
		}
		if err := g.pass(rest); err != nil {
			return err
		}
		if err := g.chunks(); err != nil {
			return err
		}
		if err := g.skip((4-g.n%4)%4 + check); err != nil {
			return err
		}
	}
}

// xzDict returns the dictionary size of the LZMA2 filter in block header
// h. Any other filter (BCJ, delta) is an xzFilterError: the decoder has
// only LZMA2.
func xzDict(h []byte) (int64, error) {
	flags := h[1]
	p := 2
	uvarint := func() bool {
		for i := 0; i < 9 && p < len(h)-4; i++ {
			p++
			if h[p-1]&0x80 == 0 {
				return true
			}
		}
		return false
	}
	for _, present := range []bool{flags&0x40 != 0, flags&0x80 != 0} {
		if present && !uvarint() {
			return 0, errXzStructure
		}
	}
	var dict int64
	for range int(flags&3) + 1 {
		if p+1 >= len(h)-4 {
			return 0, errXzStructure
		}
		id, n := h[p], int(h[p+1])
		if h[p]&0x80 != 0 || h[p+1]&0x80 != 0 || p+2+n > len(h)-4 {
			return 0, errXzStructure
		}
		if id != 0x21 {
			return 0, xzFilterError(id)
		}
		if n == 1 {
			c := int64(h[p+2] & 0x3f)
			switch {
			case c > 40:
				return 0, errXzStructure
			case c == 40:
				dict = 1<<32 - 1
			default:
				dict = (2 | c&1) << (c/2 + 11)
			}
		}
		p += 2 + n
	}
	return max(dict, lzma.MinDictCap), nil
}

// chunks copies LZMA2 chunks up to the end marker.
func (g *xzGuard) chunks() error {
	for {
		c, err := g.take(1)
		if err != nil {
			return err
		}
		switch ctl := c[0]; {
		case ctl == 0:
			return nil
		case ctl == 1 || ctl == 2:
			s, err := g.take(2)
			if err != nil {
				return err
			}
			err = g.skip(int64(binary.BigEndian.Uint16(s)) + 1)
			if err != nil {
				return err
			}
		case ctl >= 0x80:
			n := 4
			if ctl >= 0xc0 {
				n = 5 // new properties
			}
			s, err := g.take(n)
			if err != nil {
				return err
			}
			if err := g.skip(int64(binary.BigEndian.Uint16(s[2:])) + 1); err != nil {
				return err
			}
		default:
			return errXzStructure
		}
	}
}

// index copies a stream's index (its indicator already copied) and footer.
func (g *xzGuard) index() error {
	count, err := g.varint()
	if err != nil {
		return err
	}
	for i := uint64(0); i < 2*count; i++ {
		if _, err := g.varint(); err != nil {
			return err
		}
	}
	if err := g.skip((4-g.n%4)%4 + 4); err != nil { // padding, CRC32
		return err
	}
	f, err := g.take(12)
	if err != nil {
		return err
	}
	if string(f[10:]) != "YZ" {
		return errXzStructure
	}
	return nil
}

// zstdReader decompresses zstd. The window its first frame declares, and
// at least zstdDefaultWindow, is reserved, and the decoder refuses any
// frame that needs more.
func (w *walker) zstdReader(r *bufio.Reader) (io.Reader, func(), error) {
	head, _ := r.Peek(r.Size())
	// At least what zstd's levels without --long or --ultra use: a stream's
	// later frames may need more than its first (a small frame first, as
	// concatenated .zst files have), and the decoder is capped to this.
	win := max(zstdWindow(head), zstdDefaultWindow)
	if err := w.reserveWindow("zstd", win); err != nil {
		return nil, nil, err
	}
	zr, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(uint64(win)), zstd.WithDecoderMaxMemory(uint64(win)))
	if err != nil {
		w.releaseWindow(win)
		return nil, nil, err
	}
	return &zstdErrors{zr, win}, func() { zr.Close(); w.releaseWindow(win) }, nil
}

// zstdDefaultWindow is the least window reserved for a zstd stream, and
// what one whose first frame header could not be read gets: levels 1 to 19
// use at most 8 MiB (window log 23).
const zstdDefaultWindow = 8 << 20

// zstdWindow returns the window (history) size the first frame of a zstd
// stream declares: its Window_Descriptor, or its content size for a
// single-segment frame. Skippable frames are passed over.
func zstdWindow(b []byte) int64 {
	for zstdSkippable(b) {
		n := 8 + int64(binary.LittleEndian.Uint32(b[4:]))
		if n > int64(len(b)) {
			return zstdDefaultWindow
		}
		b = b[n:]
	}
	if len(b) < 6 || !bytes.HasPrefix(b, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
		return zstdDefaultWindow
	}
	fhd := b[4]
	if fhd&(1<<5) == 0 { // Window_Descriptor
		wd := b[5]
		base := int64(1) << (10 + wd>>3)
		return base + base/8*int64(wd&7)
	}
	off := 5 + []int{0, 1, 2, 4}[fhd&3]
	n := []int{1, 2, 4, 8}[fhd>>6]
	if len(b) < off+n {
		return zstdDefaultWindow
	}
	var fcs uint64
	for i := n - 1; i >= 0; i-- {
		fcs = fcs<<8 | uint64(b[off+i])
	}
	if n == 2 {
		fcs += 256
	}
	return int64(max(min(fcs, 1<<62), zstd.MinWindowSize))
}

// zstdErrors says what a refused window means.
type zstdErrors struct {
	r   io.Reader
	win int64
}

func (z *zstdErrors) Read(p []byte) (int, error) {
	n, err := z.r.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = &windowError{detail: fmt.Sprintf("a zstd frame needs a larger window than the %s this stream reserved (what its first frame declared, at least 8 MiB, within --max-window): not decompressed (unpack it and scan the result)", size(z.win))}
	}
	return n, err
}

// zstdSkippable: a zstd skippable frame (pzstd starts with one).
func zstdSkippable(b []byte) bool {
	return len(b) >= 8 && b[0]&0xf0 == 0x50 && bytes.Equal(b[1:4], []byte{0x2a, 0x4d, 0x18})
}

// xzFilterError is an xz block with a filter besides LZMA2 (xz --x86,
// --arm64, --delta): sound data the scan cannot decode.
type xzFilterError byte

func (e xzFilterError) Error() string {
	return fmt.Sprintf("xz stream with filter %#02x (a BCJ or delta filter), which dorisarm cannot decode; decompress it (xz -d) and scan the result", byte(e))
}

// xzWorkError is an xz stream whose blocks' dictionaries, with what the
// scan decompressed, pass --max-bytes.
type xzWorkError struct{ dict, limit int64 }

func (e xzWorkError) Error() string {
	return fmt.Sprintf("xz stream: a block's %d MiB dictionary, on top of what the scan has decompressed and the blocks before it allocated, passes --max-bytes (%d MiB): many blocks declaring large dictionaries are an xz bomb; or raise --max-bytes", e.dict>>20, e.limit>>20)
}
