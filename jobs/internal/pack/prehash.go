package pack

import (
	"archive/tar"
	"crypto/sha256"
	"errors"
	"hash"

	"github.com/opencontainers/go-digest"
)

// Prehash computes the digest of an uncompressed layer whose one file is
// still arriving from elsewhere (a download), so that its bytes are hashed
// while they arrive rather than read and hashed again when the layer is
// packed: kit's push of a packed layer likewise hashes nothing. The
// headers before the file are hashed at once, the file's bytes as they are
// written, and Sum adds the rest, through the same tar.Writer and Header
// that Write uses, so the digest is that of Write's bytes for the same
// items, or nothing.
type Prehash struct {
	items []Item
	h     hash.Hash
	n     counter
	tw    *tar.Writer
	file  Item
	after []Item
	got   int64
	err   error
	sum   digest.Digest
}

// NewPrehash starts the digest of items (in tar order) if they hold
// exactly one file; ok is false otherwise.
func NewPrehash(items []Item) (p *Prehash, ok bool) {
	file := -1
	for i, it := range items {
		if !it.Dir {
			if file >= 0 {
				return nil, false
			}
			file = i
		}
	}
	if file < 0 {
		return nil, false
	}
	p = &Prehash{items: items, h: sha256.New(), file: items[file], after: items[file+1:]}
	p.n.w = p.h
	p.tw = tar.NewWriter(&p.n)
	for _, it := range items[:file+1] {
		if p.err = p.tw.WriteHeader(Header(it)); p.err != nil {
			return nil, false
		}
	}
	return p, true
}

// Name is the file whose bytes Write expects.
func (p *Prehash) Name() string { return p.file.Name }

// Matches reports whether items would be written with the very headers
// this digest was started from, so that it is theirs.
func (p *Prehash) Matches(items []Item) bool {
	if len(items) != len(p.items) {
		return false
	}
	for i, it := range items {
		a, b := Header(it), Header(p.items[i])
		if a.Name != b.Name || a.Mode != b.Mode || a.Typeflag != b.Typeflag || a.Size != b.Size || a.Uid != b.Uid || a.Gid != b.Gid {
			return false
		}
	}
	return true
}

// Write takes the file's next bytes. More than its size spoils the digest
// (tar.Writer refuses them) but is no error to the writer: the download
// that feeds it must not fail because of it.
func (p *Prehash) Write(b []byte) (int, error) {
	if p.err == nil {
		_, p.err = p.tw.Write(b)
		p.got += int64(len(b))
	}
	return len(b), nil
}

// errIncomplete: Sum was asked before the whole file went through Write.
var errIncomplete = errors.New("pack: prehashed file incomplete")

// Sum finishes the layer and returns its digest and size, once exactly the
// file's size went through Write; ok is false otherwise (a download that
// was resumed, or not made in this run), and the layer is hashed when it
// is packed, as usual.
func (p *Prehash) Sum() (d digest.Digest, size int64, ok bool) {
	if p.sum != "" {
		return p.sum, p.n.n, true
	}
	if p.err == nil && p.got != p.file.Size {
		p.err = errIncomplete
	}
	for _, it := range p.after {
		if p.err == nil {
			p.err = p.tw.WriteHeader(Header(it))
		}
	}
	if p.err == nil {
		p.err = p.tw.Close()
	}
	if p.err != nil {
		return "", 0, false
	}
	p.sum = digest.NewDigest(digest.SHA256, p.h)
	return p.sum, p.n.n, true
}

// counter counts what goes through it.
type counter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
