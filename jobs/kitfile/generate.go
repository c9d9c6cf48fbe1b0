package kitfile

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The suffix lists and rules below are those of `kit init`
// (KitOps pkg/lib/kitfile/generate/generate.go), so that a Kitfile we
// generate groups files as kit's would.
var (
	weightSuffixes = []string{
		".safetensors", ".pkl", ".joblib",
		".bin", ".pth", ".pt", ".mar", ".pt2", ".ptl",
		".pb", ".ckpt", ".tflite", ".tfrecords",
		".npy", ".npz",
		".keras", ".h5", ".caffemodel", ".pmml", ".coreml",
		".gguf", ".ggml", ".ggmf", ".llamafile", ".onnx",
	}
	docsSuffixes     = []string{".md", ".adoc", ".html", ".pdf"}
	metadataSuffixes = []string{".json", ".yaml", ".xml", ".txt"}
	datasetSuffixes  = []string{".tar", ".zip", ".parquet", ".csv"}
)

// Folders kit init takes by name, whatever they hold.
var (
	docsFolders = []string{"docs"}
	codeFolders = []string{"src", "pkg", "lib", "build"}
)

// IsWeight reports a file name kit init takes for model weights.
func IsWeight(name string) bool { return hasSuffix(name, weightSuffixes) }

// IsMetadata reports a file name kit init takes for model metadata (config,
// tokenizer): a model part when there is a model, a dataset otherwise.
func IsMetadata(name string) bool { return hasSuffix(name, metadataSuffixes) }

// File is one regular file found under the root.
type File struct {
	Path string // slash-separated, relative to the root
	Size int64
}

// Dir is a folder under the root, as kit init lists it.
type Dir struct {
	Path  string // slash-separated, relative to the root; "." for the root
	Files []File
	Dirs  []Dir
}

// Ignored reports names the generator and packer never pick up, at any
// depth: VCS metadata and the worker's own state.
func Ignored(name string) bool {
	return name == ".git" || name == StateDir
}

// IgnoredAtRoot reports names kit leaves out at the root of the context:
// the Kitfile (it travels as the config) and .kitignore.
func IgnoredAtRoot(name string) bool {
	switch name {
	case "Kitfile", "kitfile", ".kitfile", ".kitignore":
		return true
	}
	return false
}

// StateDir is the folder in the workspace where the worker keeps its caches.
const StateDir = ".packline"

// Scan lists root as kit init does: regular files and folders, in lexical
// order; symlinks and other files are skipped (Validate refuses them if a
// Kitfile names them).
func Scan(root string) (*Dir, error) {
	return scan(root, ".")
}

func scan(root, rel string) (*Dir, error) {
	d := &Dir{Path: rel}
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if Ignored(e.Name()) || rel == "." && IgnoredAtRoot(e.Name()) {
			continue
		}
		p := path.Join(rel, e.Name())
		switch {
		case e.IsDir():
			sub, err := scan(root, p)
			if err != nil {
				return nil, err
			}
			d.Dirs = append(d.Dirs, *sub)
		case e.Type().IsRegular():
			info, err := e.Info()
			if err != nil {
				return nil, err
			}
			d.Files = append(d.Files, File{Path: p, Size: info.Size()})
		}
	}
	return d, nil
}

// List returns every regular file under root, in lexical order.
func List(root string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if Ignored(d.Name()) || !strings.Contains(rel, "/") && IgnoredAtRoot(d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, File{Path: rel, Size: info.Size()})
		return nil
	})
	return files, err
}

type fileType int

// The order matters: kit init decides a folder's type by going through
// these in order.
const (
	typeModel fileType = iota
	typeDataset
	typeCode
	typeDocs
	typeMetadata
	typeUnknown
)

func typeOf(name string) fileType {
	switch {
	case hasSuffix(name, weightSuffixes):
		return typeModel
	case hasSuffix(name, metadataSuffixes):
		return typeMetadata
	case hasSuffix(name, docsSuffixes):
		return typeDocs
	case hasSuffix(name, datasetSuffixes):
		return typeDataset
	}
	return typeUnknown
}

// Generate builds a Kitfile from a scanned root the way `kit init` does:
//
//   - at the root, README* and LICENSE* are docs, weights go to the model,
//     docs, datasets each get an entry, and config-like files (json, yaml,
//     xml, txt) are model parts if there is a model, datasets otherwise;
//   - a folder named docs is docs, src/pkg/lib/build are code; any other
//     folder is one entry of the one kind it holds (datasets, docs), or, for
//     weights, its files join the model; a folder of mixed or unknown
//     content is code (its weights still join the model);
//   - any other file at the root, or more than five code folders, make one
//     catch-all code entry "." in place of the code folders: the packer
//     leaves the other entries' paths out of it;
//   - of several weights the largest is the model if it is over 1.5× their
//     average size (a base model and adapters), else the first (shards);
//     the rest are parts.
//
// kit init also guesses the license from LICENSE with a classifier; we do not.
func Generate(root *Dir) *Kitfile {
	k := &Kitfile{ManifestVersion: ManifestVersion}
	catchAll := false
	var unprocessed []string
	var weights, metadata []File
	for _, f := range root.Files {
		base := strings.ToLower(path.Base(f.Path))
		switch {
		case strings.HasPrefix(base, "readme"):
			k.Docs = append(k.Docs, Docs{Path: f.Path, Description: "Readme file"})
			continue
		case strings.HasPrefix(base, "license"):
			k.Docs = append(k.Docs, Docs{Path: f.Path, Description: "License file"})
			continue
		}
		switch typeOf(f.Path) {
		case typeModel:
			weights = append(weights, f)
		case typeMetadata:
			metadata = append(metadata, f)
		case typeDocs:
			k.Docs = append(k.Docs, Docs{Path: f.Path})
		case typeDataset:
			k.DataSets = append(k.DataSets, DataSet{Path: f.Path})
		default:
			catchAll = true
		}
	}
	for _, d := range root.Dirs {
		ws, ok := addDir(k, d)
		if !ok {
			unprocessed = append(unprocessed, d.Path)
		}
		weights = append(weights, ws...)
	}
	if len(weights) > 0 {
		k.Model = model(weights)
		for _, f := range metadata {
			k.Model.Parts = append(k.Model.Parts, ModelPart{Path: f.Path})
		}
	} else {
		for _, f := range metadata {
			k.DataSets = append(k.DataSets, DataSet{Path: f.Path})
		}
	}
	if catchAll || len(unprocessed) > 5 {
		k.Code = []Code{{Path: "."}}
	} else {
		for _, p := range unprocessed {
			k.Code = append(k.Code, Code{Path: p})
		}
	}
	return k
}

// addDir adds folder d to k if its kind is clear, and returns the weights
// (with their metadata, for a model folder) that join the model. ok is
// false when the folder is to be code.
func addDir(k *Kitfile, d Dir) (weights []File, ok bool) {
	name := path.Base(d.Path)
	switch {
	case contains(docsFolders, name):
		k.Docs = append(k.Docs, Docs{Path: d.Path})
		return nil, true
	case contains(codeFolders, name):
		k.Code = append(k.Code, Code{Path: d.Path})
		return nil, true
	}
	var seen [typeUnknown + 1]bool
	seen[typeUnknown] = len(d.Dirs) > 0 // kit does not look deeper
	var metadata []File
	for _, f := range d.Files {
		t := typeOf(path.Base(f.Path))
		seen[t] = true
		switch t {
		case typeModel:
			weights = append(weights, f)
		case typeMetadata:
			metadata = append(metadata, f)
		}
	}
	overall, mixed := typeUnknown, false
	for t, ok := range seen {
		if ok && fileType(t) != typeMetadata {
			if overall != typeUnknown {
				mixed = true
			}
			overall = fileType(t)
		}
	}
	if mixed {
		return weights, false
	}
	switch overall {
	case typeModel:
		return append(weights, metadata...), true
	case typeDataset:
		k.DataSets = append(k.DataSets, DataSet{Path: d.Path})
		return weights, true
	case typeDocs:
		k.Docs = append(k.Docs, Docs{Path: d.Path})
		return weights, true
	}
	return weights, false
}

// model is kit init's choice of the main model among files.
func model(files []File) *Model {
	named := func(f File) *Model {
		return &Model{Path: f.Path, Name: strings.TrimSuffix(f.Path, path.Ext(f.Path))}
	}
	if len(files) == 1 {
		return named(files[0])
	}
	var total int64
	largest := File{Size: 0}
	for _, f := range files {
		if f.Size > largest.Size {
			largest = f
		}
		total += f.Size
	}
	avg := total / int64(len(files))
	var m *Model
	if largest.Size > avg+avg/2 {
		m = named(largest)
	} else {
		largest = files[0]
		m = &Model{Path: largest.Path}
	}
	for _, f := range files {
		if f != largest {
			m.Parts = append(m.Parts, ModelPart{Path: f.Path})
		}
	}
	return m
}

func hasSuffix(name string, suffixes []string) bool {
	for _, s := range suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
