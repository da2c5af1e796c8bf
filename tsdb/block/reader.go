package block

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/prometheus/model/labels"
)

// OpenOptions configures OpenWithOptions.
type OpenOptions struct {
	// VerifyChunksOnRead makes iterators check each chunk's CRC before decoding it.
	// Off by default: a chunk of a wide group is shared by many series, and Verify checks every chunk.
	VerifyChunksOnRead bool

	skipIndexCRC bool // fuzz tests: exercise the parsers on data whose checksums do not match (index, exemplars and starts)
}

// Block is an open, immutable block; it is safe for concurrent use until Close.
type Block struct {
	dir        string
	meta       Meta
	opts       OpenOptions
	indexPath  string
	chunksPath string
	index      []byte // mmapped index file
	chunks     []byte // mmapped chunks file
	sec        [numSections][]byte
	// Version 3 symbols: references are indices into an offset table.
	symIndexed bool
	symTab     []byte // nsyms × be32 offsets into symData
	symData    []byte
	// Version 7: series records by stride and length, record heads that
	// say whether tables are listed, postings runs.
	compact bool
	// Version 7, seriesLeadOmitted: the records leave out the pair of the
	// first label name, whose runs (first ids, value symbols) give it.
	leadFirsts, leadVals []uint32
	// Version 7, seriesAllSampled: every series has samples in the block.
	allSampled bool
	nseries    int
	ngroups    int
	names      []nameEntry
	verified   sync.Map // chunk offset → struct{}: CRC already checked
	// perGroup holds, by group, what is parsed once: the chunk lists of
	// groups with many members and (version 3) the symbol references of
	// the labels all members share.
	perGroup []groupParsed

	leadOnce sync.Once
	lead     *nameEntry // see leadingName

	// exemplars is the mmapped exemplars file, nil when the block has none.
	exemplars         []byte
	exemplarsPath     string
	exSeries, exCount uint64 // from the exemplars file's TOC

	// startsFile is the mmapped starts file, nil when the block has none.
	startsFile       []byte
	startsPath       string
	stSeries, stRuns uint64 // from the starts file's TOC
	stOnce           sync.Once
	stIndex          *startsIndex // decoded by loadStarts
	stErr            error
}

// nameEntry is one label name of the label index.
type nameEntry struct {
	name   string
	values []byte // nvalues × (value symbol ref uint32, postings offset uint32)
}

// Open opens the block in dir; see OpenWithOptions.
func Open(dir string) (*Block, error) { return OpenWithOptions(dir, OpenOptions{}) }

// OpenWithOptions maps the block's files and validates meta.json, the files' headers and TOCs and the index checksums; chunks are decoded lazily.
func OpenWithOptions(dir string, opts OpenOptions) (_ *Block, err error) {
	b := &Block{dir: dir, opts: opts, indexPath: filepath.Join(dir, IndexFilename), chunksPath: filepath.Join(dir, ChunksFilename),
		exemplarsPath: filepath.Join(dir, ExemplarsFilename), startsPath: filepath.Join(dir, StartsFilename)}
	metaPath := filepath.Join(dir, MetaFilename)
	mb, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, fmt.Errorf("open block: %w", err)
	}
	if err := json.Unmarshal(mb, &b.meta); err != nil {
		return nil, fmt.Errorf("open block: %s: %w", metaPath, err)
	}
	if !readableVersion(b.meta.Version) {
		return nil, fmt.Errorf("open block: %s: unsupported version %d", metaPath, b.meta.Version)
	}
	defer func() {
		if err != nil {
			b.Close()
		}
	}()
	if b.index, err = mmapFile(b.indexPath); err != nil {
		return nil, fmt.Errorf("open block: %w", err)
	}
	if b.chunks, err = mmapFile(b.chunksPath); err != nil {
		return nil, fmt.Errorf("open block: %w", err)
	}
	if err := b.openIndex(); err != nil {
		return nil, fmt.Errorf("open block: %s: %w", b.indexPath, err)
	}
	if err := b.openChunks(); err != nil {
		return nil, fmt.Errorf("open block: %s: %w", b.chunksPath, err)
	}
	// The exemplars file is optional: blocks without exemplars, and blocks
	// written before the file existed, have none.
	if b.exemplars, err = mmapFile(b.exemplarsPath); err != nil {
		b.exemplars = nil
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open block: %w", err)
		}
		if n := b.meta.Stats.NumExemplars; n > 0 {
			return nil, fmt.Errorf("open block: %s: missing, meta.json counts %d exemplars: %w", b.exemplarsPath, n, ErrCorrupt)
		}
	} else {
		if err := b.openExemplars(); err != nil {
			return nil, fmt.Errorf("open block: %s: %w", b.exemplarsPath, err)
		}
		if b.exCount != b.meta.Stats.NumExemplars {
			return nil, fmt.Errorf("open block: %s: TOC counts %d exemplars, meta.json %d: %w", b.exemplarsPath, b.exCount, b.meta.Stats.NumExemplars, ErrCorrupt)
		}
	}
	// The starts file is optional too (version 6 and later, with start timestamps).
	if err := b.mapStarts(); err != nil {
		return nil, fmt.Errorf("open block: %w", err)
	}
	return b, nil
}

// OpenIndexBytes parses an index file held in memory, for fuzzing and tools; chunk access is unavailable.
func openIndexBytes(data []byte, skipCRC bool) (*Block, error) {
	b := &Block{indexPath: "index", chunksPath: "chunks", index: data, opts: OpenOptions{skipIndexCRC: skipCRC}}
	if err := b.openIndex(); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return b, nil
}

func mmapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 || st.Size() != int64(int(st.Size())) {
		return nil, fmt.Errorf("%s: bad size %d: %w", path, st.Size(), ErrCorrupt)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	return b, nil
}

func (b *Block) openIndex() error {
	x := b.index
	if len(x) < indexHeaderLen+indexTOCLen {
		return fmt.Errorf("file of %d bytes too short: %w", len(x), ErrCorrupt)
	}
	if m := binary.BigEndian.Uint32(x); m != indexMagic {
		return fmt.Errorf("bad magic %#x: %w", m, ErrCorrupt)
	}
	if !readableVersion(int(x[4])) {
		return fmt.Errorf("unsupported version %d: %w", x[4], ErrCorrupt)
	}
	toc := x[len(x)-indexTOCLen:]
	if crc := crc32.Checksum(toc[:indexTOCLen-4], castagnoli); crc != binary.BigEndian.Uint32(toc[indexTOCLen-4:]) && !b.opts.skipIndexCRC {
		return fmt.Errorf("TOC checksum mismatch: %w", ErrCorrupt)
	}
	end := uint64(len(x) - indexTOCLen)
	for i := range numSections {
		off := binary.BigEndian.Uint64(toc[8*i:])
		if off < indexHeaderLen || off > end || end-off < 8 {
			return fmt.Errorf("%s section offset %d out of range: %w", sectionNames[i], off, ErrCorrupt)
		}
		n := uint64(binary.BigEndian.Uint32(x[off:]))
		if n > end-off-8 {
			return fmt.Errorf("%s section length %d out of range: %w", sectionNames[i], n, ErrCorrupt)
		}
		s := x[off+4 : off+4+n]
		if crc := crc32.Checksum(s, castagnoli); crc != binary.BigEndian.Uint32(x[off+4+n:]) && !b.opts.skipIndexCRC {
			return fmt.Errorf("%s section checksum mismatch: %w", sectionNames[i], ErrCorrupt)
		}
		b.sec[i] = s
	}
	if x[4] >= 3 {
		sy := decbuf{b: b.sec[secSymbols]}
		n := sy.uvarintInt(len(sy.b) / 4)
		b.symTab = sy.bytes(4 * n)
		if sy.err != nil {
			return fmt.Errorf("symbols table: %w: %w", sy.err, ErrCorrupt)
		}
		b.symIndexed, b.symData = true, sy.b
	}
	b.compact = x[4] >= 7
	var err error
	head, stride := 4, 1
	if b.compact {
		head, stride = seriesTableStart, seriesStride
	}
	if b.nseries, err = tableCount(b.sec[secSeries], head, stride); err != nil {
		return fmt.Errorf("series section: %w", err)
	}
	if b.ngroups, err = tableCount(b.sec[secGroups], 4, 1); err != nil {
		return fmt.Errorf("groups section: %w", err)
	}
	b.perGroup = make([]groupParsed, b.ngroups) // 16 bytes per group, against the section's 4 or more
	li := b.sec[secLabels]
	if len(li) < 4 {
		return fmt.Errorf("label index too short: %w", ErrCorrupt)
	}
	no := binary.BigEndian.Uint32(li)
	if no < 4 || uint64(no) > uint64(len(li)) {
		return fmt.Errorf("label index names offset %d: %w", no, ErrCorrupt)
	}
	d := decbuf{b: li[no:]}
	n := d.uvarintInt(len(li))
	b.names = make([]nameEntry, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		ref := d.uvarint()
		nv := d.uvarintInt(len(li) / 8)
		vo := d.uvarintInt(len(li))
		if d.err != nil {
			break
		}
		name, err := b.symbol(ref)
		if err != nil {
			return fmt.Errorf("label name %d: %w", i, err)
		}
		if vo+8*nv > int(no) || vo < 4 {
			return fmt.Errorf("label %q values table out of range: %w", name, ErrCorrupt)
		}
		if i > 0 && name <= b.names[i-1].name {
			return fmt.Errorf("label names out of order: %w", ErrCorrupt)
		}
		b.names = append(b.names, nameEntry{name: name, values: li[vo : vo+8*nv]})
	}
	if d.err != nil {
		return fmt.Errorf("label index: %w: %w", d.err, ErrCorrupt)
	}
	if b.compact {
		b.allSampled = b.sec[secSeries][seriesFlags]&seriesAllSampled != 0
	}
	if b.compact && b.sec[secSeries][seriesFlags]&seriesLeadOmitted != 0 {
		return b.loadLead()
	}
	return nil
}

// loadLead keeps the runs of the first label name, whose pair the series
// records leave out (version 7, seriesLeadOmitted): their first ids and
// value symbols, 8 bytes per value.
func (b *Block) loadLead() error {
	e := b.leadingName()
	if e == nil {
		return fmt.Errorf("series records leave out the first label name, whose postings are not runs over every series: %w", ErrCorrupt)
	}
	for i := 0; i+8 <= len(e.values); i += 8 {
		l, err := b.plistAt(binary.BigEndian.Uint32(e.values[i+4:]), true)
		if err != nil {
			return err
		}
		if l.n > 0 {
			b.leadFirsts = append(b.leadFirsts, l.first)
			b.leadVals = append(b.leadVals, binary.BigEndian.Uint32(e.values[i:]))
		}
	}
	if len(b.leadFirsts) == 0 || b.leadFirsts[0] != 0 {
		return fmt.Errorf("runs of the first label name do not start at series 0: %w", ErrCorrupt)
	}
	return nil
}

// tableCount validates the count and offset table of the series or groups
// section: the table starts at head and has an entry for every stride-th
// record.
func tableCount(s []byte, head, stride int) (int, error) {
	if len(s) < 4 {
		return 0, fmt.Errorf("too short: %w", ErrCorrupt)
	}
	n := uint64(binary.BigEndian.Uint32(s))
	if uint64(head)+4*((n+uint64(stride)-1)/uint64(stride)) > uint64(len(s)) {
		return 0, fmt.Errorf("count %d exceeds section: %w", n, ErrCorrupt)
	}
	return int(n), nil
}

func (b *Block) openChunks() error {
	c := b.chunks
	if len(c) < 8+20 {
		return fmt.Errorf("file of %d bytes too short: %w", len(c), ErrCorrupt)
	}
	if m := binary.BigEndian.Uint32(c); m != chunksMagic {
		return fmt.Errorf("bad magic %#x: %w", m, ErrCorrupt)
	}
	if !readableVersion(int(c[4])) || c[5]|c[6]|c[7] != 0 {
		return fmt.Errorf("unsupported version %d or flags %x: %w", c[4], c[5:8], ErrCorrupt)
	}
	toc := c[len(c)-20:]
	if crc32.Checksum(toc[:16], castagnoli) != binary.BigEndian.Uint32(toc[16:]) {
		return fmt.Errorf("TOC checksum mismatch: %w", ErrCorrupt)
	}
	if end := binary.BigEndian.Uint64(toc); end != uint64(len(c)-20) {
		return fmt.Errorf("TOC says chunks end at %d, file has %d bytes: %w", end, len(c), ErrCorrupt)
	}
	return nil
}

// Meta returns the block's meta.json content.
func (b *Block) Meta() Meta { return b.meta }

// MinTime returns the block's first timestamp (its meta's MinTime).
func (b *Block) MinTime() int64 { return b.meta.MinTime }

// Dir returns the block's directory.
func (b *Block) Dir() string { return b.dir }

// Close unmaps the block's files; iterators must not be used afterwards.
func (b *Block) Close() error {
	var err error
	for _, m := range []*[]byte{&b.index, &b.chunks, &b.exemplars, &b.startsFile} {
		if *m != nil {
			if e := syscall.Munmap(*m); e != nil && err == nil {
				err = fmt.Errorf("close block %s: %w", b.dir, e)
			}
			*m = nil
		}
	}
	return err
}

// symbolBytes returns the symbol at ref, aliasing the index.
func (b *Block) symbolBytes(ref uint64) ([]byte, error) {
	s := b.sec[secSymbols]
	if b.symIndexed {
		if ref >= uint64(len(b.symTab)/4) {
			return nil, fmt.Errorf("symbol %d of %d: %w", ref, len(b.symTab)/4, ErrCorrupt)
		}
		s, ref = b.symData, uint64(binary.BigEndian.Uint32(b.symTab[4*ref:]))
	}
	if ref >= uint64(len(s)) {
		return nil, fmt.Errorf("symbol ref %d out of range: %w", ref, ErrCorrupt)
	}
	d := decbuf{b: s[ref:]}
	v := d.bytes(d.uvarintInt(len(s)))
	if d.err != nil {
		return nil, fmt.Errorf("symbol %d: %w: %w", ref, d.err, ErrCorrupt)
	}
	return v, nil
}

func (b *Block) symbol(ref uint64) (string, error) {
	v, err := b.symbolBytes(ref)
	return string(v), err
}

// addLabel adds the pair of symbols nr, vr to lb without copying them: lb
// copies the pairs into the labels it builds (see scratchString), and the
// block's bytes outlive the call that builds them.
func (b *Block) addLabel(lb *labels.ScratchBuilder, nr, vr uint64) error {
	n, err := b.symbolBytes(nr)
	if err != nil {
		return err
	}
	v, err := b.symbolBytes(vr)
	if err != nil {
		return err
	}
	lb.Add(scratchString(n), scratchString(v))
	return nil
}

// record returns the i-th record of the series or groups section.
func record(s []byte, n, i int) ([]byte, error) {
	if i < 0 || i >= n {
		return nil, fmt.Errorf("record %d of %d: %w", i, n, ErrCorrupt)
	}
	o := uint64(4+4*n) + uint64(binary.BigEndian.Uint32(s[4+4*i:]))
	if o >= uint64(len(s)) {
		return nil, fmt.Errorf("record %d offset out of range: %w", i, ErrCorrupt)
	}
	return s[o:], nil
}

// seriesRecord returns series id's record. Version 7 lists the offset of
// every seriesStride-th record, and each record is preceded by its length:
// the records before id in its stride are skipped by their lengths.
func (b *Block) seriesRecord(id int) ([]byte, error) {
	s := b.sec[secSeries]
	if !b.compact {
		return record(s, b.nseries, id)
	}
	if id < 0 || id >= b.nseries {
		return nil, fmt.Errorf("record %d of %d: %w", id, b.nseries, ErrCorrupt)
	}
	tab := s[seriesTableStart:]
	o := uint64(seriesTableStart+4*((b.nseries+seriesStride-1)/seriesStride)) + uint64(binary.BigEndian.Uint32(tab[4*(id/seriesStride):]))
	for k := id % seriesStride; ; k-- {
		if o >= uint64(len(s)) {
			return nil, fmt.Errorf("record %d offset out of range: %w", id, ErrCorrupt)
		}
		n, w := binary.Uvarint(s[o:])
		if w <= 0 || n > uint64(len(s))-o-uint64(w) {
			return nil, fmt.Errorf("record %d: bad length: %w", id, ErrCorrupt)
		}
		if o += uint64(w); k == 0 {
			return s[o : o+n], nil
		}
		o += n
	}
}

// seriesInfo is a decoded series record (without labels).
type seriesInfo struct {
	group, member int
	tables        []memberTable
}

// series decodes series id's record; labels are appended to lb when it is non-nil.
func (b *Block) series(id uint32, lb *labels.ScratchBuilder, tables []memberTable) (seriesInfo, error) {
	si := seriesInfo{tables: tables[:0]}
	rec, err := b.seriesRecord(int(id))
	if err != nil {
		return si, fmt.Errorf("%s: series %d: %w", b.indexPath, id, err)
	}
	d := decbuf{b: rec}
	nl, listed := d.uvarintInt(2*len(rec)+1), true
	if b.compact {
		nl, listed = nl>>1, nl&1 == 1
	}
	if lb != nil && b.leadFirsts != nil {
		// Version 7: the first label name's pair, from its runs.
		k, _ := slices.BinarySearch(b.leadFirsts, id+1)
		if k == 0 {
			return si, fmt.Errorf("%s: series %d before the first run of %q: %w", b.indexPath, id, b.names[0].name, ErrCorrupt)
		}
		v, err := b.symbolBytes(uint64(b.leadVals[k-1]))
		if err != nil {
			return si, fmt.Errorf("%s: series %d: %w", b.indexPath, id, err)
		}
		lb.Add(b.names[0].name, scratchString(v))
	}
	// Version 3: the series' own pairs are merged with those its group's
	// members share, both in label order, instead of sorted after.
	var own [16]symPair
	merge := lb != nil && b.symIndexed && nl <= len(own)
	for i := 0; i < nl && d.err == nil; i++ {
		nr, vr := d.uvarint(), d.uvarint()
		if lb == nil || d.err != nil {
			continue
		}
		if merge {
			if own[i], err = b.symPair(nr, vr); err != nil {
				return si, fmt.Errorf("%s: series %d: %w", b.indexPath, id, err)
			}
			continue
		}
		if err := b.addLabel(lb, nr, vr); err != nil {
			return si, fmt.Errorf("%s: series %d: %w", b.indexPath, id, err)
		}
	}
	si.group = d.uvarintInt(b.ngroups - 1)
	if lb != nil && b.symIndexed && d.err == nil {
		common, err := b.groupCommonPairs(si.group)
		if err != nil {
			return si, fmt.Errorf("series %d: %w", id, err)
		}
		if merge {
			mergePairs(lb, own[:nl], common)
		} else {
			for _, p := range common {
				lb.Add(p.name, p.value)
			}
			if len(common) > 0 {
				lb.Sort()
			}
		}
	}
	si.member = d.uvarintInt(len(b.sec[secSeries]))
	nt := 0
	if listed {
		nt = d.uvarintInt(len(rec))
	}
	if nt == 0 && b.symIndexed && (!listed || !b.compact) {
		// Version 3: every chunk of the group's shared table.
		si.tables = append(si.tables, memberTable{table: 0, first: 0, last: allChunks})
	}
	for i := 0; i < nt && d.err == nil; i++ {
		t := d.uvarintInt(len(b.sec[secGroups]))
		f := d.uvarintInt(len(b.sec[secGroups]))
		l := d.uvarintInt(len(b.sec[secGroups]))
		si.tables = append(si.tables, memberTable{table: t, first: f, last: f + l})
	}
	if d.err != nil {
		return si, fmt.Errorf("%s: series %d: %w: %w", b.indexPath, id, d.err, ErrCorrupt)
	}
	return si, nil
}

// symPair is a label pair as views of the block's symbols (see addLabel).
type symPair struct{ name, value string }

// symPair resolves the pair of symbols nr, vr.
func (b *Block) symPair(nr, vr uint64) (symPair, error) {
	n, err := b.symbolBytes(nr)
	if err != nil {
		return symPair{}, err
	}
	v, err := b.symbolBytes(vr)
	if err != nil {
		return symPair{}, err
	}
	return symPair{scratchString(n), scratchString(v)}, nil
}

// mergePairs adds the pairs of a and c, each in label order as the block
// writes them, to lb in label order; pairs out of order (a corrupt record)
// are sorted after.
func mergePairs(lb *labels.ScratchBuilder, a, c []symPair) {
	i, k, prev, ordered := 0, 0, "", true
	for i < len(a) || k < len(c) {
		var p symPair
		if k == len(c) || i < len(a) && a[i].name < c[k].name {
			p, i = a[i], i+1
		} else {
			p, k = c[k], k+1
		}
		if p.name < prev {
			ordered = false
		}
		prev = p.name
		lb.Add(p.name, p.value)
	}
	if !ordered {
		lb.Sort()
	}
}

// groupCommonPairs is groupCommon with the symbols resolved, kept once
// resolved.
func (b *Block) groupCommonPairs(g int) ([]symPair, error) {
	if g >= 0 && g < len(b.perGroup) {
		if c := b.perGroup[g].pairs.Load(); c != nil {
			return *c, nil
		}
	}
	refs, err := b.groupCommon(g)
	if err != nil {
		return nil, err
	}
	pairs := make([]symPair, 0, len(refs)/2)
	for k := 0; k+1 < len(refs); k += 2 {
		p, err := b.symPair(refs[k], refs[k+1])
		if err != nil {
			return nil, fmt.Errorf("%s: group %d: %w", b.indexPath, g, err)
		}
		pairs = append(pairs, p)
	}
	b.perGroup[g].pairs.Store(&pairs)
	return pairs, nil
}

// groupCommon returns the symbol references (name, value, ...) of the label
// pairs every member of group g has, from the end of its record (version 3);
// parsed once per group.
func (b *Block) groupCommon(g int) ([]uint64, error) {
	if g < 0 || g >= len(b.perGroup) {
		return nil, fmt.Errorf("%s: group %d of %d: %w", b.indexPath, g, len(b.perGroup), ErrCorrupt)
	}
	if c := b.perGroup[g].common.Load(); c != nil {
		return *c, nil
	}
	_, _, _, rest, err := b.parseGroup(g)
	if err != nil {
		return nil, err
	}
	d := decbuf{b: rest}
	n := d.uvarintInt(len(rest) / 2)
	common := make([]uint64, 0, 2*n)
	for i := 0; i < 2*n && d.err == nil; i++ {
		common = append(common, d.uvarint())
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s: group %d common labels: %w: %w", b.indexPath, g, d.err, ErrCorrupt)
	}
	b.perGroup[g].common.Store(&common)
	return common, nil
}

// groupParsed is what a block keeps of one group's record once parsed.
type groupParsed struct {
	metas  atomic.Pointer[[][]chunkMeta]
	common atomic.Pointer[[]uint64]
	pairs  atomic.Pointer[[]symPair] // common, resolved
}

// allChunks as a member table's last chunk means the table's last one.
const allChunks = math.MaxInt32

// groupChunks appends the chunks [first, last] of table t of group g to dst.
func (b *Block) groupChunks(g, t, first, last int, dst []chunkMeta) ([]chunkMeta, error) {
	if g < 0 || g >= len(b.perGroup) {
		return dst, fmt.Errorf("%s: group %d of %d: %w", b.indexPath, g, len(b.perGroup), ErrCorrupt)
	}
	if v := b.perGroup[g].metas.Load(); v != nil {
		tables := *v
		if t >= len(tables) {
			return dst, fmt.Errorf("%s: group %d: table %d of %d: %w", b.indexPath, g, t, len(tables), ErrCorrupt)
		}
		cms := tables[t]
		if last == allChunks {
			last = len(cms) - 1
		}
		if first < 0 || last >= len(cms) || first > last {
			return dst, nil
		}
		return append(dst, cms[first:last+1]...), nil
	}
	rec, err := record(b.sec[secGroups], b.ngroups, g)
	if err != nil {
		return dst, fmt.Errorf("%s: group %d: %w", b.indexPath, g, err)
	}
	d := decbuf{b: rec}
	d.bytes(d.uvarintInt(len(rec)))
	nm := d.uvarintInt(len(rec))
	for i := 0; i < nm; i++ {
		d.uvarint()
	}
	nt := d.uvarintInt(len(rec))
	if d.err == nil && t >= nt {
		return dst, fmt.Errorf("%s: group %d: table %d of %d: %w", b.indexPath, g, t, nt, ErrCorrupt)
	}
	// The members of a large group read the same record: parse it once.
	cache := nm >= groupMetasMinMembers
	var tables [][]chunkMeta
	for ti := 0; (ti <= t || cache && ti < nt) && d.err == nil; ti++ {
		nc := d.uvarintInt(len(rec))
		var off uint64
		var cms []chunkMeta
		for ci := 0; ci < nc && d.err == nil; ci++ {
			minT := d.varint()
			span := d.uvarint()
			off += d.uvarint()
			cm := chunkMeta{minT: minT, maxT: minT + int64(span), off: off}
			if ti == t && ci >= first && ci <= last {
				dst = append(dst, cm)
			}
			if cache {
				cms = append(cms, cm)
			}
		}
		if cache {
			tables = append(tables, cms)
		}
	}
	if d.err != nil {
		return dst, fmt.Errorf("%s: group %d: %w: %w", b.indexPath, g, d.err, ErrCorrupt)
	}
	if cache {
		b.perGroup[g].metas.Store(&tables)
	}
	return dst, nil
}

// groupMetasMinMembers is the group size from which a group's chunk lists
// are parsed once and kept (see Block.groupChunks).
const groupMetasMinMembers = 16

// groupInfo decodes group g's key, member series ids and table count.
func (b *Block) groupInfo(g int) (key string, members []uint32, tables [][]chunkMeta, err error) {
	key, members, tables, _, err = b.parseGroup(g)
	return key, members, tables, err
}

// parseGroup decodes group g's record and returns what follows its tables
// (version 3: the label pairs its members share).
func (b *Block) parseGroup(g int) (key string, members []uint32, tables [][]chunkMeta, rest []byte, err error) {
	rec, err := record(b.sec[secGroups], b.ngroups, g)
	if err != nil {
		return "", nil, nil, nil, fmt.Errorf("%s: group %d: %w", b.indexPath, g, err)
	}
	d := decbuf{b: rec}
	key = string(d.bytes(d.uvarintInt(len(rec))))
	nm := d.uvarintInt(len(rec))
	for i := 0; i < nm && d.err == nil; i++ {
		members = append(members, uint32(d.uvarintInt(b.nseries-1)))
	}
	nt := d.uvarintInt(len(rec))
	for ti := 0; ti < nt && d.err == nil; ti++ {
		nc := d.uvarintInt(len(rec))
		var cms []chunkMeta
		var off uint64
		for ci := 0; ci < nc && d.err == nil; ci++ {
			minT := d.varint()
			span := d.uvarint()
			off += d.uvarint()
			cms = append(cms, chunkMeta{minT: minT, maxT: minT + int64(span), off: off})
		}
		tables = append(tables, cms)
	}
	if d.err != nil {
		return "", nil, nil, nil, fmt.Errorf("%s: group %d: %w: %w", b.indexPath, g, d.err, ErrCorrupt)
	}
	return key, members, tables, d.b, nil
}

// checkedChunkBody returns the body of the chunk at off, checking its CRC the
// first time the chunk is read (or every time with VerifyChunksOnRead): a
// damaged chunk gives an error, never wrong values, and a chunk shared by a
// wide group's members is checksummed once, not once per member.
func (b *Block) checkedChunkBody(off uint64) ([]byte, int, error) {
	if b.opts.VerifyChunksOnRead {
		return b.chunkBody(off, true)
	}
	if _, ok := b.verified.Load(off); ok {
		return b.chunkBody(off, false)
	}
	body, n, err := b.chunkBody(off, true)
	if err == nil {
		b.verified.Store(off, struct{}{})
	}
	return body, n, err
}

// chunkBody returns the body of the chunk at off, checking its CRC if verify is set.
func (b *Block) chunkBody(off uint64, verify bool) ([]byte, int, error) {
	c := b.chunks
	if len(c) < 28 {
		return nil, 0, fmt.Errorf("%s: no chunk data: %w", b.chunksPath, ErrCorrupt)
	}
	end := uint64(len(c)) - 20
	if off < 8 || off >= end {
		return nil, 0, fmt.Errorf("%s: chunk offset %d out of range: %w", b.chunksPath, off, ErrCorrupt)
	}
	n, k := binary.Uvarint(c[off:end])
	if k <= 0 || n > end-off-uint64(k) || end-off-uint64(k)-n < 4 {
		return nil, 0, fmt.Errorf("%s: chunk at %d: bad length: %w", b.chunksPath, off, ErrCorrupt)
	}
	body := c[off+uint64(k) : off+uint64(k)+n]
	if verify {
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(c[off+uint64(k)+n:]) {
			return nil, 0, fmt.Errorf("%s: chunk at %d: checksum mismatch: %w", b.chunksPath, off, ErrCorrupt)
		}
	}
	return body, k + int(n) + 4, nil
}

// Labels returns the labels of series id.
func (b *Block) Labels(id uint32) (labels.Labels, error) {
	var lb labels.ScratchBuilder
	if _, err := b.series(id, &lb, nil); err != nil {
		return labels.EmptyLabels(), err
	}
	return lb.Labels(), nil
}

// NumSeries returns the number of series in the block's index.
func (b *Block) NumSeries() int { return b.nseries }

// findName returns the label index entry of name.
func (b *Block) findName(name string) (*nameEntry, bool) {
	i, ok := slices.BinarySearchFunc(b.names, name, func(e nameEntry, n string) int { return strings.Compare(e.name, n) })
	if !ok {
		return nil, false
	}
	return &b.names[i], true
}

// forValues calls fn for each value of a label name in order; fn returns false to stop.
func (b *Block) forValues(e *nameEntry, fn func(v []byte, postingsOff uint32) bool) error {
	for i := 0; i+8 <= len(e.values); i += 8 {
		v, err := b.symbolBytes(uint64(binary.BigEndian.Uint32(e.values[i:])))
		if err != nil {
			return fmt.Errorf("%s: label %q: %w", b.indexPath, e.name, err)
		}
		if !fn(v, binary.BigEndian.Uint32(e.values[i+4:])) {
			break
		}
	}
	return nil
}

// findValue returns the postings offset of name=value.
func (b *Block) findValue(e *nameEntry, value string) (uint32, bool, error) {
	n := len(e.values) / 8
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		v, e2 := b.symbolBytes(uint64(binary.BigEndian.Uint32(e.values[8*m:])))
		if e2 != nil {
			return 0, false, fmt.Errorf("%s: label %q: %w", b.indexPath, e.name, e2)
		}
		if string(v) < value {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < n {
		v, e2 := b.symbolBytes(uint64(binary.BigEndian.Uint32(e.values[8*lo:])))
		if e2 != nil {
			return 0, false, fmt.Errorf("%s: label %q: %w", b.indexPath, e.name, e2)
		}
		if string(v) == value {
			return binary.BigEndian.Uint32(e.values[8*lo+4:]), true, nil
		}
	}
	return 0, false, nil
}
