package kitfile

import (
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Suffix lists follow `kit init` (pkg/lib/kitfile/generate), plus ".bin"
// weights and a few dataset and code types it leaves to "unknown".
var (
	weightSuffixes = []string{
		".safetensors", ".gguf", ".ggml", ".ggmf", ".llamafile", ".onnx", ".bin",
		".pt", ".pth", ".pt2", ".ptl", ".mar", ".pkl", ".joblib",
		".pb", ".ckpt", ".tflite", ".tfrecords", ".npy", ".npz",
		".keras", ".h5", ".caffemodel", ".pmml", ".coreml",
	}
	// Metadata travels with the model (as parts) when there is one, and is
	// a dataset otherwise, as kit does.
	metadataSuffixes = []string{".json", ".yaml", ".yml", ".xml", ".txt", ".model", ".tiktoken", ".vocab"}
	docsSuffixes     = []string{".md", ".adoc", ".html", ".pdf", ".rst"}
	datasetSuffixes  = []string{".csv", ".tsv", ".parquet", ".jsonl", ".arrow", ".tar", ".zip"}
)

// File is one regular file found under the root.
type File struct {
	Path string // slash-separated, relative to the root
	Size int64
}

// Ignored reports names the generator and packer never pick up: Kitfiles
// (they travel as the config), VCS metadata, and the worker's own state.
func Ignored(name string) bool {
	switch name {
	case "Kitfile", "kitfile", ".kitfile", ".git", StateDir:
		return true
	}
	return false
}

// StateDir is the folder in the workspace where the worker keeps its caches.
const StateDir = ".packline"

// List walks root and returns its regular files in lexical order. Symlinks
// and other non-regular files are skipped; Validate refuses them if a
// Kitfile names them.
func List(root string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if Ignored(d.Name()) {
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
		rel, _ := filepath.Rel(root, p)
		files = append(files, File{Path: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	return files, err
}

// Generate builds a Kitfile with one layer per file, classified as `kit
// init` does: weights are the model (the largest one if it stands out, else
// the first) and its parts; config and tokenizer files are parts too; README
// and LICENSE files, like *.md, are docs; tables are datasets; the rest is code.
func Generate(files []File) *Kitfile {
	k := &Kitfile{ManifestVersion: ManifestVersion}
	var weights, metadata []File
	for _, f := range files {
		base := strings.ToLower(path.Base(f.Path))
		switch {
		case strings.HasPrefix(base, "readme"):
			k.Docs = append(k.Docs, Docs{Path: f.Path, Description: "Readme file"})
		case strings.HasPrefix(base, "license"):
			k.Docs = append(k.Docs, Docs{Path: f.Path, Description: "License file"})
		case hasSuffix(base, weightSuffixes):
			weights = append(weights, f)
		case hasSuffix(base, metadataSuffixes):
			metadata = append(metadata, f)
		case hasSuffix(base, docsSuffixes):
			k.Docs = append(k.Docs, Docs{Path: f.Path})
		case hasSuffix(base, datasetSuffixes):
			k.DataSets = append(k.DataSets, DataSet{Path: f.Path})
		default:
			k.Code = append(k.Code, Code{Path: f.Path})
		}
	}
	if len(weights) == 0 {
		for _, f := range metadata {
			k.DataSets = append(k.DataSets, DataSet{Path: f.Path})
		}
		return k
	}
	main := mainWeight(weights)
	k.Model = &Model{Path: main.Path, Name: strings.TrimSuffix(path.Base(main.Path), path.Ext(main.Path))}
	for _, f := range append(weights, metadata...) {
		if f.Path != main.Path {
			k.Model.Parts = append(k.Model.Parts, ModelPart{Path: f.Path})
		}
	}
	sort.SliceStable(k.Model.Parts, func(i, j int) bool { return k.Model.Parts[i].Path < k.Model.Parts[j].Path })
	return k
}

// mainWeight is kit's rule: the largest file if it is over 1.5× the
// average (a base model with adapters), else the first (a sharded model).
func mainWeight(ws []File) File {
	var total int64
	largest := ws[0]
	for _, w := range ws {
		total += w.Size
		if w.Size > largest.Size {
			largest = w
		}
	}
	avg := total / int64(len(ws))
	if largest.Size > avg+avg/2 {
		return largest
	}
	return ws[0]
}

func hasSuffix(name string, suffixes []string) bool {
	for _, s := range suffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}
