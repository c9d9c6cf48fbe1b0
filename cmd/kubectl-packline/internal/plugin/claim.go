package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/controllers/claims"
	"github.com/packline/packline/jobs/render"
	"github.com/packline/packline/jobs/render/archive"
	"github.com/packline/packline/jobs/render/source"
)

func claimFlags(fs *pflag.FlagSet, o *options) {
	fs.StringArrayVar(&o.set, "set", nil, "a value, KEY=VALUE, typed by the template's schema (repeat; nested keys with dots)")
	fs.StringArrayVarP(&o.files, "values", "f", nil, "a YAML file of values (repeat; later files and --set win)")
	fs.StringVar(&o.exposure, "exposure", "", "the exposure type (ClusterIP, NodePort, LoadBalancer, Ingress); default ClusterIP")
	fs.StringVar(&o.host, "host", "", "the Ingress host, with --exposure Ingress")
	fs.StringVar(&o.tag, "tag", "", "spec.target.tag (default: the controller's, latest)")
	fs.BoolVar(&o.plainHTTP, "plain-http", false, "spec.target.plainHTTP: push over plain HTTP (a registry on loopback)")
	fs.BoolVar(&o.diff, "diff", false, "with --dry-run=local: print a diff against the manifests the existing Claim NAME pushed, instead of the manifests")
	fs.StringVar(&o.dryRun, "dry-run", "none", "local: render here with the worker's code and print the manifests; server: create with dryRun=All so the webhooks run; none: create the Claim")
}

// runClaim builds a Claim from the flags, checks it with the admission
// webhook's rules, and renders, dry-runs or creates it.
func runClaim(ctx context.Context, e *env, o *options, args []string) (int, error) {
	if len(args) != 2 {
		return ExitUsage, usagef("claim takes TEMPLATE NAME")
	}
	switch o.dryRun {
	case "none", "local", "server":
	default:
		return ExitUsage, usagef("--dry-run: want local, server or none, not %q", o.dryRun)
	}
	if o.diff && o.dryRun != "local" {
		return ExitUsage, usagef("--diff needs --dry-run=local")
	}
	var files []NamedBytes
	for _, f := range o.files {
		b, err := os.ReadFile(f)
		if err != nil {
			return ExitUsage, usagef("-f: %v", err)
		}
		files = append(files, NamedBytes{Name: f, Data: b})
	}
	if err := e.connect(); err != nil {
		return ExitFailed, err
	}
	tpl := &v1alpha1.ClaimTemplate{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: args[0]}, tpl); err != nil {
		return ExitFailed, fmt.Errorf("spec.templateRef.name: reading ClaimTemplate %s: %w", args[0], err)
	}
	c, err := buildClaim(tpl, e.ns, args[1], o, files)
	if err != nil {
		return ExitFailed, err
	}
	acc, err := e.newAccess(ctx)
	if err != nil {
		return ExitFailed, err
	}
	if problems := localProblems(ctx, acc, c, tpl); len(problems) > 0 {
		return ExitFailed, fmt.Errorf("the Claim would be refused:\n  %s", strings.Join(problems, "\n  "))
	}
	switch o.dryRun {
	case "local":
		return e.renderLocal(ctx, acc, c, tpl, o.diff)
	case "server":
		if err := e.c.Create(ctx, c, client.DryRunAll); err != nil {
			return ExitFailed, fmt.Errorf("server dry run: %w", err)
		}
		fmt.Fprintf(e.stdout, "claim.packline.dev/%s created (server dry run: the API server and packline's webhooks accepted it)\n", c.Name)
		return ExitOK, nil
	}
	if err := e.c.Create(ctx, c); err != nil {
		return ExitFailed, err
	}
	fmt.Fprintf(e.stdout, "claim.packline.dev/%s created\nFollow it with: kubectl packline why claim/%s -n %s\n", c.Name, c.Name, c.Namespace)
	return ExitOK, nil
}

// buildClaim is the Claim the flags describe. Values errors name their
// field (spec.values.<path>).
func buildClaim(tpl *v1alpha1.ClaimTemplate, ns, name string, o *options, files []NamedBytes) (*v1alpha1.Claim, error) {
	var schema *Schema
	if tpl.Spec.ValuesSchema != nil {
		s, err := ParseSchema(tpl.Spec.ValuesSchema.Raw)
		if err != nil {
			return nil, fmt.Errorf("ClaimTemplate %s: %w", tpl.Name, err)
		}
		schema = s
	}
	values, err := ParseValues(schema, files, o.set)
	if err != nil {
		return nil, err
	}
	return claimFor(tpl, ns, name, o, values)
}

// claimFor is the Claim of tpl named name in ns, with values and the
// exposure and target flags of o.
func claimFor(tpl *v1alpha1.ClaimTemplate, ns, name string, o *options, values map[string]any) (*v1alpha1.Claim, error) {
	c := &v1alpha1.Claim{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Claim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ClaimSpec{
			TemplateRef: v1alpha1.TemplateReference{Name: tpl.Name},
			Exposure:    v1alpha1.Exposure{Type: v1alpha1.ExposureType(o.exposure), Host: o.host},
		},
	}
	if o.tag != "" || o.plainHTTP {
		c.Spec.Target = &v1alpha1.Target{Tag: o.tag, PlainHTTP: o.plainHTTP}
	}
	if c.Spec.Exposure.Type == "" {
		c.Spec.Exposure.Type = v1alpha1.ExposureClusterIP
	}
	if len(values) > 0 {
		raw, err := json.Marshal(values)
		if err != nil {
			return nil, err
		}
		c.Spec.Values = &apiextensionsv1.JSON{Raw: raw}
	}
	return c, nil
}

// localProblems are what the webhook would refuse, checked here: the
// template's rules (claims.Violations: access, exposure, values against
// the schema, target) and the user's rights (groups, the claim verb,
// create on each rendered kind).
func localProblems(ctx context.Context, acc *access, c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate) []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, v := range claims.Violations(c, tpl, acc.nsLabels) {
		if v.Reason == claims.ReasonAccessDenied && acc.nsErr != nil {
			continue // reported by check, as unknown
		}
		add(v.Err.Error())
	}
	for _, w := range acc.check(ctx, tpl, c).Why {
		add(w)
	}
	return out
}

// renderLocal renders c with the worker's own code and prints the
// manifests, or with diff what they change against what c pushed.
func (e *env) renderLocal(ctx context.Context, acc *access, c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate, diff bool) (int, error) {
	r, err := e.render(ctx, acc, c, tpl)
	if r.Note != "" {
		fmt.Fprintln(e.stderr, "Note:", r.Note)
	}
	if err != nil {
		return ExitFailed, err
	}
	if diff {
		return e.diffPushed(ctx, c, r.Files)
	}
	fmt.Fprintf(e.stdout, "# %s\n", r.Header)
	for i, f := range r.Files {
		if i > 0 {
			fmt.Fprintln(e.stdout, "---")
		}
		fmt.Fprintf(e.stdout, "# %s\n%s", f.Name, strings.TrimSuffix(string(f.Data), "\n")+"\n")
	}
	return ExitOK, nil
}

// rendered is a local render: what it is of (Header), a Note when the
// namespace's EnvironmentProfile could not be used, and the manifests.
type rendered struct {
	Header string
	Note   string
	Files  []archive.File
}

// render renders c with the worker's own code (jobs/render), from a clone
// made with the worker's own Git code, with the namespace's
// EnvironmentProfile when the user may read it. The catalogue page's
// preview is this same render.
func (e *env) render(ctx context.Context, acc *access, c *v1alpha1.Claim, tpl *v1alpha1.ClaimTemplate) (rendered, error) {
	var r rendered
	if tpl.Spec.Private() {
		return r, fmt.Errorf("ClaimTemplate %s reads a private repository (spec.source.secretRef): its credentials are for the manager only, so it cannot be rendered here; use --dry-run=server", tpl.Name)
	}
	profile, note := e.profile(ctx, acc)
	r.Note = note
	var arts v1alpha1.ArtifactList
	artifacts := map[string]*v1alpha1.Artifact{}
	if len(claims.BoundArtifacts(c, tpl)) > 0 {
		if err := e.c.List(ctx, &arts, client.InNamespace(e.ns)); err != nil {
			return r, fmt.Errorf("listing the Artifacts the values bind: %w", err)
		}
		for i := range arts.Items {
			artifacts[arts.Items[i].Name] = &arts.Items[i]
		}
	}
	values, params, _, err := claims.ResolveArtifacts(c, tpl, artifacts)
	if err != nil {
		return r, err
	}
	exposure, err := claims.CheckExposure(tpl, c.Spec.Exposure)
	if err != nil {
		return r, err
	}
	tplSpec := *tpl.Spec.DeepCopy()
	tplSpec.Parameters = params
	tplSpec.Exposures = []v1alpha1.ExposureOption{exposure}
	doc := workerv1.Claim{Name: c.Name, Namespace: c.Namespace, Template: tplSpec, Values: values, Exposure: c.Spec.Exposure}
	if profile != nil {
		doc.Profile = profile.Spec.DeepCopy()
	}
	dir, err := os.MkdirTemp("", "kubectl-packline-clone-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	rev, snap, err := source.Fetch(ctx, source.Options{URL: tpl.Spec.Source.URL, Ref: tpl.Spec.Source.Ref, Dir: dir})
	if err != nil {
		return r, fmt.Errorf("cloning ClaimTemplate %s spec.source: %w", tpl.Name, err)
	}
	files, err := render.Manifests(doc, snap, render.Limits{})
	if err != nil {
		return r, fmt.Errorf("rendering: %w", err)
	}
	r.Header = fmt.Sprintf("Claim %s/%s of ClaimTemplate %s at %s (%s), rendered locally", c.Namespace, c.Name, tpl.Name, render.Revision(rev), profileName(profile))
	r.Files = files
	return r, nil
}

func profileName(p *v1alpha1.EnvironmentProfile) string {
	if p == nil {
		return "no EnvironmentProfile"
	}
	return "EnvironmentProfile " + p.Name
}

// profile picks the namespace's EnvironmentProfile as the controller does;
// note says when it could not.
func (e *env) profile(ctx context.Context, acc *access) (*v1alpha1.EnvironmentProfile, string) {
	if acc.nsErr != nil {
		return nil, "rendering without an EnvironmentProfile: cannot read the namespace's labels: " + reason(acc.nsErr)
	}
	var list v1alpha1.EnvironmentProfileList
	if err := e.c.List(ctx, &list); err != nil {
		why := err.Error()
		if apierrors.IsForbidden(err) {
			why = "forbidden (ask an admin for list on environmentprofiles.packline.dev, a cluster-wide right)"
		}
		return nil, "rendering without an EnvironmentProfile: cannot list EnvironmentProfiles: " + why
	}
	p, err := claims.SelectProfile(list.Items, acc.nsLabels)
	if err != nil {
		return nil, err.Error()
	}
	return p, ""
}

// diffPushed prints what a new render changes against the manifests the
// existing Claim pushed (pulled by digest and verified, as pull does).
func (e *env) diffPushed(ctx context.Context, c *v1alpha1.Claim, files []archive.File) (int, error) {
	cur := &v1alpha1.Claim{}
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(c), cur); err != nil {
		return ExitFailed, fmt.Errorf("--diff: reading Claim %s: %w", c.Name, err)
	}
	repo, d, err := pushedRepository("Claim", cur)
	if err != nil {
		return ExitFailed, fmt.Errorf("--diff: %w", err)
	}
	dir, err := os.MkdirTemp("", "kubectl-packline-pushed-")
	if err != nil {
		return ExitFailed, err
	}
	defer os.RemoveAll(dir)
	if _, err := Pull(ctx, repo, d, dir, io.Discard); err != nil {
		return ExitFailed, fmt.Errorf("--diff: pulling %s: %w", cur.Status.Reference, err)
	}
	old := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ExitFailed, err
	}
	for _, ent := range ents {
		if ent.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dir, ent.Name()))
			if err != nil {
				return ExitFailed, err
			}
			old[ent.Name()] = string(b)
		}
	}
	now := map[string]string{}
	for _, f := range files {
		now[f.Name] = string(f.Data)
	}
	out := DiffFiles(old, now)
	if out == "" {
		fmt.Fprintf(e.stdout, "No change against what Claim %s pushed (%s)\n", c.Name, cur.Status.Reference)
		return ExitOK, nil
	}
	fmt.Fprintf(e.stdout, "# against what Claim %s pushed (%s)\n%s", c.Name, cur.Status.Reference, out)
	return ExitOK, nil
}
