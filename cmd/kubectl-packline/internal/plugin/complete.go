package plugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// CompleteVerb is the hidden verb kubectl's plugin completion reaches:
// kubectl 1.26 and later runs the executable kubectl_complete-packline
// (found on PATH) with the words after `kubectl packline`, the last one
// being the word to complete, and reads one candidate a line (a tab then
// a description may follow), then `:N`, a Cobra ShellCompDirective.
// kubectl_complete-packline is this binary under that name (a symlink),
// or the script next to main.go that runs `kubectl-packline __complete`.
const CompleteVerb = "__complete"

// Cobra's ShellCompDirective values, as kubectl reads them.
const (
	compDefault    = 0
	compNoFileComp = 4
	compFilterDirs = 16
)

// lister looks names up in the cluster for completion: "namespaces",
// "claimtemplates", "claims", "artifacts". Errors give no names.
type lister func(what string) []string

// runComplete prints the completions of args, looking names up with the
// user's kubeconfig and the -n, --kubeconfig and --context already typed.
func runComplete(ctx context.Context, args []string, stdout io.Writer) int {
	if len(args) == 0 {
		args = []string{""}
	}
	cands, directive := Completions(args, clusterLister(ctx, args))
	for _, c := range cands {
		fmt.Fprintln(stdout, c)
	}
	fmt.Fprintf(stdout, ":%d\n", directive)
	return ExitOK
}

// verbFlags is a verb's flag set, global flags included, as Main makes it.
func verbFlags(v verb, o *options) *pflag.FlagSet {
	fs := pflag.NewFlagSet(v.name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file")
	fs.StringVar(&o.context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "the namespace")
	if v.flags != nil {
		v.flags(fs, o)
	}
	return fs
}

// Completions answers one completion: args are the words after
// `kubectl packline`, the last the one being typed.
func Completions(args []string, list lister) ([]string, int) {
	words, cur := args[:len(args)-1], args[len(args)-1]
	if len(words) == 0 {
		var out []string
		for _, v := range verbs() {
			if strings.HasPrefix(v.name, cur) {
				out = append(out, v.name+"\t"+v.short)
			}
		}
		return out, compNoFileComp
	}
	var v *verb
	for _, cand := range verbs() {
		if cand.name == words[0] {
			v = &cand
			break
		}
	}
	if v == nil {
		return nil, compNoFileComp
	}
	fs := verbFlags(*v, &options{})
	// A flag's value: the word after a flag that takes one, or --flag=.
	if name, val, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "--") {
		if f := fs.Lookup(strings.TrimPrefix(name, "--")); f != nil {
			cands, d := flagValues(f.Name, val, list)
			for i := range cands {
				cands[i] = name + "=" + cands[i]
			}
			return cands, d
		}
	}
	if f := takesValue(fs, words[len(words)-1]); f != nil {
		return flagValues(f.Name, cur, list)
	}
	if strings.HasPrefix(cur, "-") {
		var out []string
		fs.VisitAll(func(f *pflag.Flag) {
			for _, n := range []string{"--" + f.Name, "-" + f.Shorthand} {
				if n != "-" && strings.HasPrefix(n, cur) {
					out = append(out, n+"\t"+f.Usage)
				}
			}
		})
		return out, compNoFileComp
	}
	pos := 0
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case strings.HasPrefix(w, "-"):
			if takesValue(fs, w) != nil {
				i++
			}
		default:
			pos++
		}
	}
	return positional(v.name, pos, cur, list)
}

// takesValue is the flag w names when it takes its value in the next word.
func takesValue(fs *pflag.FlagSet, w string) *pflag.Flag {
	if !strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
		return nil
	}
	var f *pflag.Flag
	if strings.HasPrefix(w, "--") {
		f = fs.Lookup(w[2:])
	} else if len(w) == 2 {
		f = fs.ShorthandLookup(w[1:])
	}
	if f == nil || f.NoOptDefVal != "" {
		return nil
	}
	return f
}

func flagValues(flag, cur string, list lister) ([]string, int) {
	switch flag {
	case "namespace":
		return prefixed(list("namespaces"), cur), compNoFileComp
	case "exposure":
		return prefixed([]string{"ClusterIP", "NodePort", "LoadBalancer", "Ingress"}, cur), compNoFileComp
	case "dry-run":
		return prefixed([]string{"local", "server", "none"}, cur), compNoFileComp
	case "kubeconfig", "values", "key":
		return nil, compDefault
	}
	return nil, compNoFileComp
}

// positional completes the pos-th argument of verb.
func positional(verb string, pos int, cur string, list lister) ([]string, int) {
	refs := func(kinds ...string) []string {
		var out []string
		for _, k := range kinds {
			for _, n := range list(k + "s") {
				out = append(out, k+"/"+n)
			}
		}
		return prefixed(out, cur)
	}
	switch {
	case verb == "claim" && pos == 0:
		return prefixed(list("claimtemplates"), cur), compNoFileComp
	case (verb == "why" || verb == "rerun") && pos == 0:
		return refs("claim", "artifact", "claimtemplate"), compNoFileComp
	case (verb == "pull" || verb == "verify") && pos == 0:
		return refs("claim", "artifact"), compNoFileComp
	case verb == "pull" && pos == 1:
		return nil, compFilterDirs
	case verb == "completion" && pos == 0:
		return prefixed([]string{"bash"}, cur), compNoFileComp
	}
	return nil, compNoFileComp
}

func prefixed(ss []string, cur string) []string {
	var out []string
	for _, s := range ss {
		if strings.HasPrefix(s, cur) {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// clusterLister lists names with the user's kubeconfig, in the namespace
// the words name (-n) or the context's. A lookup takes at most 5 s.
func clusterLister(ctx context.Context, args []string) lister {
	var o options
	if len(args) > 1 {
		for _, v := range verbs() {
			if v.name == args[0] {
				fs := verbFlags(v, &o)
				fs.ParseErrorsAllowlist.UnknownFlags = true
				_ = fs.Parse(args[1 : len(args)-1])
			}
		}
	}
	e := &env{o: &o, stdout: io.Discard, stderr: io.Discard}
	return func(what string) []string {
		if e.connect() != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var (
			l     client.ObjectList
			names func() []string
			opts  = []client.ListOption{client.InNamespace(e.ns)}
		)
		switch what {
		case "namespaces":
			nl := &corev1.NamespaceList{}
			l, opts, names = nl, nil, func() []string { return itemNames(len(nl.Items), func(i int) string { return nl.Items[i].Name }) }
		case "claimtemplates":
			tl := &v1alpha1.ClaimTemplateList{}
			l, opts, names = tl, nil, func() []string { return itemNames(len(tl.Items), func(i int) string { return tl.Items[i].Name }) }
		case "claims":
			cl := &v1alpha1.ClaimList{}
			l, names = cl, func() []string { return itemNames(len(cl.Items), func(i int) string { return cl.Items[i].Name }) }
		case "artifacts":
			al := &v1alpha1.ArtifactList{}
			l, names = al, func() []string { return itemNames(len(al.Items), func(i int) string { return al.Items[i].Name }) }
		default:
			return nil
		}
		if err := e.c.List(ctx, l, opts...); err != nil {
			return nil
		}
		return names()
	}
}

func itemNames(n int, name func(int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name(i)
	}
	return out
}
