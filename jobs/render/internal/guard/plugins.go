package guard

import (
	"bytes"
	"io/fs"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/kyaml/kio"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// loadingFields are the fields of kustomize's builtin plugin
// configurations whose values the plugin loads through kustomize's loader
// (and so would fetch over http(s)): PatchTransformer and
// PatchJson6902Transformer path, PatchStrategicMergeTransformer paths,
// ReplacementTransformer replacements[].path, ValueAddTransformer
// targetFilePath, ConfigMapGenerator and SecretGenerator files, envs and
// env, HelmChartInflationGenerator valuesFile and friends.
var loadingFields = map[string]bool{
	"path": true, "paths": true, "targetFilePath": true,
	"files": true, "envs": true, "env": true,
	"valuesFile": true, "additionalValuesFiles": true, "chartHome": true,
}

// checkInlineConfig checks an inline generator, transformer or validator.
func (t Tree) checkInlineConfig(doc, where string) error {
	return checkConfigs([]byte(doc), where+" (inline plugin configuration)")
}

// checkPluginConfigs reads every YAML file in the sandbox for builtin
// plugin configurations. Only those run (external plugins are disabled),
// and a kustomization can feed one to krusty from any file, through
// generators, transformers, validators or a directory of them, so all
// files are read rather than only the ones a kustomization names.
func (t Tree) checkPluginConfigs() error {
	var files []string
	for _, r := range t.Roots {
		err := t.FS.Walk(r, func(p string, info fs.FileInfo, err error) error {
			if err != nil {
				return err
			}
			if !info.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	sort.Strings(files)
	for _, p := range files {
		b, err := t.FS.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(konfig.BuiltinPluginApiVersion)) {
			continue
		}
		if err := checkConfigs(b, t.display(p)); err != nil {
			return err
		}
	}
	return nil
}

// checkConfigs refuses a builtin plugin configuration in b that loads a
// remote file, or inflates a Helm chart. Documents that do not parse are
// left to kustomize, which fails on them itself.
func checkConfigs(b []byte, where string) error {
	nodes, err := (&kio.ByteReader{Reader: bytes.NewReader(b), OmitReaderAnnotations: true}).Read()
	if err != nil {
		return nil
	}
	for _, n := range nodes {
		if n.GetApiVersion() != konfig.BuiltinPluginApiVersion {
			continue
		}
		if n.GetKind() == "HelmChartInflationGenerator" {
			return rejected("%s inflates a Helm chart, which needs the helm binary and is not allowed", where)
		}
		for _, v := range loadedValues(n.YNode(), "") {
			if IsRemote(v) {
				return rejected("%s: builtin %s loads %q: remote bases and files are not allowed, the template must be self-contained in its repository", where, n.GetKind(), v)
			}
		}
	}
	return nil
}

// loadedValues collects the scalar values under loadingFields anywhere in
// node (replacements[].path sits one level down).
func loadedValues(node *yaml.Node, key string) []string {
	var out []string
	switch node.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(node.Content); i += 2 {
			out = append(out, loadedValues(node.Content[i+1], node.Content[i].Value)...)
		}
	case yaml.SequenceNode:
		for _, c := range node.Content {
			out = append(out, loadedValues(c, key)...)
		}
	case yaml.ScalarNode:
		if loadingFields[key] {
			v := node.Value
			if key == "files" {
				if _, p, ok := strings.Cut(v, "="); ok {
					v = p
				}
			}
			out = append(out, v)
		}
	}
	return out
}
