package plugin

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompletions(t *testing.T) {
	names := map[string][]string{
		"namespaces": {"default", "team-a"}, "claimtemplates": {"code-server", "vllm"},
		"claims": {"ide"}, "artifacts": {"llama", "tiny"},
	}
	list := func(what string) []string { return names[what] }
	firstWords := func(ss []string) []string {
		var out []string
		for _, s := range ss {
			w, _, _ := strings.Cut(s, "\t")
			out = append(out, w)
		}
		return out
	}
	for _, tc := range []struct {
		args      []string
		want      []string
		directive int
	}{
		{[]string{""}, []string{"catalog", "claim", "why", "rerun", "pull", "verify", "ui", "completion"}, compNoFileComp},
		{[]string{"c"}, []string{"catalog", "claim", "completion"}, compNoFileComp},
		{[]string{"claim", ""}, []string{"code-server", "vllm"}, compNoFileComp},
		{[]string{"claim", "-n", "team-a", "v"}, []string{"vllm"}, compNoFileComp},
		{[]string{"claim", "vllm", ""}, nil, compNoFileComp},
		{[]string{"claim", "vllm", "x", "--dry-run", ""}, []string{"local", "none", "server"}, compNoFileComp},
		{[]string{"claim", "vllm", "x", "--dry-run=l"}, []string{"--dry-run=local"}, compNoFileComp},
		{[]string{"claim", "vllm", "x", "--exposure", "N"}, []string{"NodePort"}, compNoFileComp},
		{[]string{"claim", "vllm", "x", "-f", ""}, nil, compDefault},
		{[]string{"claim", "--plain-http", ""}, []string{"code-server", "vllm"}, compNoFileComp},
		{[]string{"why", ""}, []string{"artifact/llama", "artifact/tiny", "claim/ide", "claimtemplate/code-server", "claimtemplate/vllm"}, compNoFileComp},
		{[]string{"why", "--namespace", ""}, []string{"default", "team-a"}, compNoFileComp},
		{[]string{"why", "--namespace=t"}, []string{"--namespace=team-a"}, compNoFileComp},
		{[]string{"pull", "claim/"}, []string{"claim/ide"}, compNoFileComp},
		{[]string{"pull", "claim/ide", ""}, nil, compFilterDirs},
		{[]string{"verify", "-n", "team-a", "a"}, []string{"artifact/llama", "artifact/tiny"}, compNoFileComp},
		{[]string{"ui", "--p"}, []string{"--port"}, compNoFileComp},
		{[]string{"catalog", "-"}, []string{"--all", "-A", "--context", "--kubeconfig", "--namespace", "-n"}, compNoFileComp},
		{[]string{"completion", ""}, []string{"bash"}, compNoFileComp},
		{[]string{"nonsense", ""}, nil, compNoFileComp},
	} {
		got, d := Completions(tc.args, list)
		gotWords := firstWords(got)
		if strings.HasSuffix(tc.args[len(tc.args)-1], "-") {
			// flags come in pflag's order; compare as sets
			gotWords = prefixed(gotWords, "")
			tc.want = prefixed(tc.want, "")
		}
		if diff := cmp.Diff(tc.want, gotWords); diff != "" || d != tc.directive {
			t.Errorf("Completions(%q): directive %d (want %d), words (-want +got):\n%s", tc.args, d, tc.directive, diff)
		}
	}
}
