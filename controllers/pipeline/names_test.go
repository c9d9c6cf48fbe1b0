package pipeline

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RunBase names an admin run's children after the tenant namespace and a
// hash of the owner's UID, so two tenants' Claims of one name never share
// a Job or a workspace in the template namespace.
func TestRunBase(t *testing.T) {
	claim := func(ns, name, uid string) Owner {
		o := owner
		o.GVK.Kind, o.Namespace, o.Name, o.UID = "Claim", ns, name, uid
		return o
	}
	long := strings.Repeat("n", 63)
	for _, tc := range []struct {
		name  string
		owner Owner
		ns    string
		want  string
	}{
		{"in the owner's namespace", claim("team-a", "ide", "u1"), "team-a", "ide"},
		{"namespace left empty", claim("team-a", "ide", "u1"), "", "ide"},
		{"cluster-scoped owner", claim("", "tpl", "u1"), "packline-system", "tpl"},
		{"admin run", claim("team-a", "ide", "u1"), "packline-system", "team-a-ide-" + short(hashOf("u1"), 8)},
		{"admin run, long names", claim(long, long, "u1"), "packline-system", long[:54] + "-" + short(hashOf("u1"), 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RunBase(tc.owner, tc.ns)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RunBase (-want +got):\n%s", diff)
			}
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("%q: %v", got, errs)
			}
		})
	}
}

// Two tenants, the same Claim name, one template namespace: distinct Job
// and workspace names, even where namespace and name split differently
// ("team-a" + "b-c" against "team-a-b" + "c").
func TestAdminRunNamesAreDistinctAcrossTenants(t *testing.T) {
	mk := func(ns, name, uid string) (job, ws string) {
		o := owner
		o.Namespace, o.Name, o.UID = ns, name, uid
		p := jobParams(func(p *JobParams) { p.Owner, p.Namespace = o, "packline-system" })
		j := BuildJob(p)
		return j.Name, BuildWorkspace(WorkspaceParams{Owner: o, Namespace: "packline-system"}).Name
	}
	for _, pair := range [][2][3]string{
		{{"team-a", "ide", "uid-1"}, {"team-b", "ide", "uid-2"}},
		{{"team-a", "b-c", "uid-1"}, {"team-a-b", "c", "uid-2"}},
	} {
		j1, w1 := mk(pair[0][0], pair[0][1], pair[0][2])
		j2, w2 := mk(pair[1][0], pair[1][1], pair[1][2])
		if j1 == j2 || w1 == w2 {
			t.Errorf("%v and %v share names: Jobs %s %s, workspaces %s %s", pair[0], pair[1], j1, j2, w1, w2)
		}
		if !strings.HasPrefix(j1, pair[0][0]+"-") || !strings.HasPrefix(w1, pair[0][0]+"-") {
			t.Errorf("Job %s or workspace %s does not start with the tenant namespace %s", j1, w1, pair[0][0])
		}
	}
}
