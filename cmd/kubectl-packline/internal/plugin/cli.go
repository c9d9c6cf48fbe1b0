// Package plugin is kubectl-packline's logic. Each verb is one file; the
// pure parts (values parsing, the why exit code, the catalogue's values
// column) are table-tested, the rest runs against the sandbox in
// test/e2e/plugin_test.go.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
)

// Exit codes shared by every verb; why adds ExitProgressing.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitProgressing = 2
	// ExitUsage is a command line that could not be run.
	ExitUsage = 3
)

// verb is one subcommand.
type verb struct {
	name, args, short string
	flags             func(*pflag.FlagSet, *options)
	run               func(ctx context.Context, e *env, o *options, args []string) (int, error)
}

// options are every verb's flags; each verb registers the ones it reads.
type options struct {
	kubeconfig, context, namespace string

	all      bool
	set      []string
	files    []string
	exposure string
	host     string
	tag      string

	plainHTTP bool
	diff      bool
	dryRun    string
	tail      int64
	key       string
	port      int
}

func verbs() []verb {
	return []verb{
		{name: "catalog", short: "list the ClaimTemplates you may claim in the namespace", flags: catalogFlags, run: runCatalog},
		{name: "claim", args: "TEMPLATE NAME", short: "create a Claim (or preview it with --dry-run=local|server)", flags: claimFlags, run: runClaim},
		{name: "why", args: "KIND/NAME", short: "explain why a Claim, Artifact or ClaimTemplate is not Ready (exit 0 Ready, 1 failed, 2 progressing)", flags: whyFlags, run: runWhy},
		{name: "rerun", args: "KIND/NAME", short: "ask for a new run (sets packline.dev/requestedAt)", run: runRerun},
		{name: "pull", args: "KIND/NAME DIR", short: "fetch the pushed artifact by digest, verify it and unpack it into DIR", run: runPull},
		{name: "verify", args: "KIND/NAME", short: "check the cosign signature and SLSA provenance of the pushed digest", flags: verifyFlags, run: runVerify},
		{name: "ui", short: "serve the catalogue page on 127.0.0.1: template cards, a form, a preview, Create, live status", flags: uiFlags, run: runUI},
		{name: "completion", args: "bash", short: "print a bash completion script", run: runCompletion},
	}
}

// Main runs the plugin with args (without the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	if args[0] == CompleteVerb {
		return runComplete(ctx, args[1:], stdout)
	}
	var v *verb
	for _, cand := range verbs() {
		if cand.name == args[0] {
			v = &cand
			break
		}
	}
	if v == nil {
		fmt.Fprintf(stderr, "kubectl packline: unknown command %q\n", args[0])
		usage(stderr)
		return ExitUsage
	}
	var o options
	fs := pflag.NewFlagSet("kubectl packline "+v.name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "the kubeconfig context to use")
	fs.StringVarP(&o.namespace, "namespace", "n", "", "the namespace (default: the context's)")
	if v.flags != nil {
		v.flags(fs, &o)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kubectl packline %s %s [flags]\n\n%s\n\nFlags:\n%s", v.name, v.args, v.short, fs.FlagUsages())
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	e := &env{o: &o, stdout: stdout, stderr: stderr}
	code, err := v.run(ctx, e, &o, fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		var u usageError
		if errors.As(err, &u) {
			return ExitUsage
		}
		if code == ExitOK {
			code = ExitFailed
		}
	}
	return code
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kubectl packline: packline's tenant tools, with your own kubeconfig and rights.\n\nCommands:")
	for _, v := range verbs() {
		fmt.Fprintf(w, "  %-10s %-16s %s\n", v.name, v.args, v.short)
	}
	fmt.Fprintln(w, "\nGlobal flags: --kubeconfig, --context, -n/--namespace. Run `kubectl packline COMMAND --help` for a command's flags.")
}

// usageError is a command line that cannot be run (exit code ExitUsage).
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// env is the connection to the cluster, made on first use, with the
// user's kubeconfig (clientcmd's loading rules: --kubeconfig, $KUBECONFIG,
// ~/.kube/config) and nothing else.
type env struct {
	o              *options
	stdout, stderr io.Writer

	cfg  *rest.Config
	ns   string
	c    client.Client
	kube kubernetes.Interface
}

// Scheme holds every type the plugin reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, corev1.AddToScheme, batchv1.AddToScheme,
		authorizationv1.AddToScheme, authenticationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func (e *env) connect() error {
	if e.c != nil {
		return nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = e.o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: e.o.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns := e.o.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("kubeconfig namespace: %w", err)
		}
	}
	cfg.UserAgent = "kubectl-packline"
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	e.cfg, e.ns, e.c, e.kube = cfg, ns, c, kube
	return nil
}

// kinds the plugin resolves KIND/NAME to, by every name kubectl accepts.
var kindNames = map[string]string{
	"claim": "Claim", "claims": "Claim", "clm": "Claim", "claim.packline.dev": "Claim", "claims.packline.dev": "Claim",
	"artifact": "Artifact", "artifacts": "Artifact", "artifact.packline.dev": "Artifact", "artifacts.packline.dev": "Artifact",
	"claimtemplate": "ClaimTemplate", "claimtemplates": "ClaimTemplate", "ctpl": "ClaimTemplate",
	"claimtemplate.packline.dev": "ClaimTemplate", "claimtemplates.packline.dev": "ClaimTemplate",
}

// ParseRef splits KIND/NAME; allowed lists the kinds the verb takes.
func ParseRef(s string, allowed ...string) (kind, name string, err error) {
	k, n, ok := strings.Cut(s, "/")
	if !ok || n == "" || strings.Contains(n, "/") {
		return "", "", usagef("%q: want KIND/NAME, for example claim/my-app", s)
	}
	kind = kindNames[strings.ToLower(k)]
	for _, a := range allowed {
		if a == kind {
			return kind, n, nil
		}
	}
	sort.Strings(allowed)
	return "", "", usagef("%q: KIND must be one of %s", k, strings.Join(lower(allowed), ", "))
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

// getPipelineObject reads an Artifact or Claim.
func (e *env) getPipelineObject(ctx context.Context, kind, name string) (pipelineObject, error) {
	var obj pipelineObject
	switch kind {
	case "Claim":
		obj = &v1alpha1.Claim{}
	case "Artifact":
		obj = &v1alpha1.Artifact{}
	default:
		return nil, usagef("%s is not an Artifact or a Claim", kind)
	}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, obj); err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, e.ns, name, err)
	}
	return obj, nil
}

// pipelineObject is an Artifact or a Claim.
type pipelineObject interface {
	client.Object
	GetPipelineStatus() *v1alpha1.PipelineStatus
	GetPushTarget() v1alpha1.Target
}
