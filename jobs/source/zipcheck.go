package source

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
)

// maxZipDirectoryBytes bounds the central directory archive/zip would load:
// names can be 64 KiB each, so a count of entries alone does not bound it.
const maxZipDirectoryBytes = 64 << 20

// Zip record signatures and fixed sizes (APPNOTE.TXT 4.3.12, 4.3.14-16).
var (
	sigDirectoryEnd      = []byte("PK\x05\x06")
	sigZip64End          = []byte("PK\x06\x06")
	sigZip64EndLocator   = []byte("PK\x06\x07")
	sigDirectoryHeader   = []byte("PK\x01\x02")
	directoryEndLen      = 22
	zip64LocatorLen      = 20
	zip64EndLen          = 56
	directoryHeaderLen   = 46
	maxDirectoryEndSpace = directoryEndLen + 0xffff // record and longest comment
)

// checkZipDirectory refuses a zip whose central directory holds more than
// lim.MaxEntries records or more than maxZipDirectoryBytes, reading it
// record by record in constant memory. It counts as archive/zip does: from
// the directory offset (also as shifted by data prepended to the archive),
// until a record does not start with the directory header signature, so
// the declared count, which archive/zip only checks modulo 65536, cannot
// understate it. Archives it cannot make sense of are left to archive/zip.
func checkZipDirectory(path string, lim Limits) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	tailLen := min(size, int64(maxDirectoryEndSpace))
	tail := make([]byte, tailLen)
	if _, err := f.ReadAt(tail, size-tailLen); err != nil {
		return nil
	}
	i := bytes.LastIndex(tail, sigDirectoryEnd)
	if i < 0 || len(tail)-i < directoryEndLen {
		return nil
	}
	endOffset := size - tailLen + int64(i)
	end := tail[i:]
	records := uint64(binary.LittleEndian.Uint16(end[10:]))
	dirSize := uint64(binary.LittleEndian.Uint32(end[12:]))
	dirOffset := uint64(binary.LittleEndian.Uint32(end[16:]))
	if records == 0xffff || dirSize == 0xffffffff || dirOffset == 0xffffffff {
		// Zip64: the locator sits right before the end record.
		if endOffset >= int64(zip64LocatorLen) {
			loc := make([]byte, zip64LocatorLen)
			if _, err := f.ReadAt(loc, endOffset-int64(zip64LocatorLen)); err == nil && bytes.HasPrefix(loc, sigZip64EndLocator) {
				rec := make([]byte, zip64EndLen)
				at := binary.LittleEndian.Uint64(loc[8:])
				if at < uint64(size) {
					if _, err := f.ReadAt(rec, int64(at)); err == nil && bytes.HasPrefix(rec, sigZip64End) {
						records = binary.LittleEndian.Uint64(rec[32:])
						dirSize = binary.LittleEndian.Uint64(rec[40:])
						dirOffset = binary.LittleEndian.Uint64(rec[48:])
						endOffset = int64(at)
					}
				}
			}
		}
	}
	if records > uint64(lim.MaxEntries) {
		return unsafeArchive("zip archive declares %d entries, more than %d", records, lim.MaxEntries)
	}
	if dirSize > maxZipDirectoryBytes {
		return unsafeArchive("zip central directory is %d bytes, more than %d", dirSize, maxZipDirectoryBytes)
	}
	starts := []uint64{dirOffset}
	if base := endOffset - int64(dirSize) - int64(dirOffset); base > 0 {
		starts = append(starts, dirOffset+uint64(base))
	}
	for _, start := range starts {
		if start >= uint64(size) {
			continue
		}
		if err := countDirectory(f, int64(start), size, lim); err != nil {
			return err
		}
	}
	return nil
}

// countDirectory walks directory headers from start.
func countDirectory(f io.ReaderAt, start, size int64, lim Limits) error {
	h := make([]byte, directoryHeaderLen)
	n := 0
	for pos := start; pos+int64(directoryHeaderLen) <= size; {
		if _, err := f.ReadAt(h, pos); err != nil || !bytes.HasPrefix(h, sigDirectoryHeader) {
			return nil
		}
		if n++; n > lim.MaxEntries {
			return unsafeArchive("zip archive has more than %d entries", lim.MaxEntries)
		}
		pos += int64(directoryHeaderLen) + int64(binary.LittleEndian.Uint16(h[28:])) +
			int64(binary.LittleEndian.Uint16(h[30:])) + int64(binary.LittleEndian.Uint16(h[32:]))
		if pos-start > maxZipDirectoryBytes {
			return unsafeArchive("zip central directory is more than %d bytes", maxZipDirectoryBytes)
		}
	}
	return nil
}
