package gitrepo

import (
	"io"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// BlobIDs names each regular file under sub (a folder of the repository)
// by its blob id, read from the commit's trees without opening a file: a
// new commit leaves the id of every file it did not change, so their
// layers are not sent again (see push.layerKey). A checkout is the blobs
// themselves (go-git applies no filters), so the id names what is packed.
// A path that only resolves through a symbolic link gets no ids, and its
// layers are hashed while uploaded.
func BlobIDs(commit *object.Commit, sub string) map[string]string {
	tree, err := commit.Tree()
	if err != nil {
		return nil
	}
	if sub = strings.TrimPrefix(path.Clean("/"+sub), "/"); sub != "" {
		if tree, err = tree.Tree(sub); err != nil {
			return nil
		}
	}
	ids := map[string]string{}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			return ids
		}
		if err != nil {
			return nil
		}
		// Links and submodules are never packed (see pack.Walk).
		if e.Mode == filemode.Regular || e.Mode == filemode.Executable {
			ids[name] = "gitblob:" + e.Hash.String()
		}
	}
}
