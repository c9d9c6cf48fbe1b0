package main

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/packline/packline/api/v1alpha1"
	workerv1 "github.com/packline/packline/api/worker/v1"
	"github.com/packline/packline/test/gitserver"
	"github.com/packline/packline/test/regtest"
)

// `worker claim` for a private template reads the credential from
// PACKLINE_TEMPLATE_AUTH_DIR (workerv1.TemplateAuthDir in a pod): the right one
// renders and pushes; a wrong one is a permanent TemplateAuthDenied; and
// neither the termination message nor the log holds a password, even in
// the URL.
func TestClaimPrivateTemplate(t *testing.T) {
	const password = "PrivateTplMARKER-4b1d"
	host := regtest.Start(t)
	git := gitserver.Serve(t, gitserver.Repo{Commits: []gitserver.Commit{{Dir: gitserver.FixtureDir(t, "templates")}}},
		gitserver.Options{Username: "platform-bot", Password: password})
	cases := []struct {
		name       string
		url        string
		files      map[string]string
		wantReason string
	}{
		{name: "right credential", files: map[string]string{"username": "platform-bot", "password": password + "\n"}},
		{name: "wrong credential", files: map[string]string{"username": "platform-bot", "password": "not-" + password}, wantReason: workerv1.ReasonTemplateAuth},
		{name: "no credential", files: map[string]string{}, wantReason: workerv1.ReasonTemplateAuth},
		{name: "credential in the url", files: map[string]string{"username": "platform-bot", "password": password},
			url: strings.Replace(git.URL, "http://", "http://platform-bot:"+password+"@", 1), wantReason: workerv1.ReasonInvalidSpec},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := git.URL
			if tc.url != "" {
				url = tc.url
			}
			stderr := captureStderr(t)
			t.Setenv(EnvTemplateAuthDir, writeFiles(t, tc.files))
			code, res := runClaimWorker(t, workerv1.Claim{
				Name: "ide", Namespace: "team-a",
				Template: v1alpha1.ClaimTemplateSpec{
					Source: v1alpha1.TemplateSource{URL: url, Ref: "main", Path: "apps/code-server/base",
						SecretRef: &corev1.LocalObjectReference{Name: "repo-creds"}},
					Kinds:   []v1alpha1.RenderedKind{{Group: "apps", Kind: "Deployment"}, {Kind: "Service"}, {Kind: "PersistentVolumeClaim"}},
					Service: "code-server",
				},
				Target: workerv1.Target{Repository: host + "/claims/team-a/ide", Tag: "v1", PlainHTTP: true},
			})
			if tc.wantReason == "" {
				if code != 0 || res.Failed() || res.SourceRevision != git.Commits[0] {
					t.Fatalf("exit %d, result %+v", code, res)
				}
			} else if code == 0 || res.Error == nil || res.Error.Reason != tc.wantReason || !res.Error.Permanent {
				t.Fatalf("exit %d, result %+v; want permanent %s", code, res, tc.wantReason)
			}
			msg, _ := json.Marshal(res)
			for what, text := range map[string]string{"result": string(msg), "log": stderr()} {
				if strings.Contains(text, password) {
					t.Errorf("the %s holds the password: %s", what, text)
				}
			}
		})
	}
}
