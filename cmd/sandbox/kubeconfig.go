package main

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/packline/packline/test/sandbox"
)

// The demo's second user: a member of group tenantGroup with no rights
// until an admin grants them (docs/tutorials/platform-admin.md does), so
// the tutorials act as a tenant with a credential of its own, not through
// the admin's impersonation.
const (
	adminContext    = "sandbox-admin"
	tenantUser      = "alice"
	tenantGroup     = "team-a"
	tenantNamespace = "team-a"
)

// writeDemoKubeconfig writes one kubeconfig to path with two contexts:
// adminContext (system:masters, the current one) and tenantUser (in
// tenantGroup, namespace tenantNamespace). A second terminal reaches the
// demo with `export KUBECONFIG=path` and changes user with `kubectl config
// use-context`. The caller removes it on exit: a kubeconfig left behind
// would point at a control plane that is gone.
func writeDemoKubeconfig(s *sandbox.Sandbox, path string) error {
	admin, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		return err
	}
	tenantPath, err := s.UserKubeconfig(tenantUser, tenantUser, []string{tenantGroup})
	if err != nil {
		return err
	}
	tenant, err := clientcmd.LoadFromFile(tenantPath)
	if err != nil {
		return err
	}
	out := clientcmdapi.NewConfig()
	for name, c := range admin.Clusters {
		out.Clusters[name] = c
	}
	for name, a := range admin.AuthInfos {
		out.AuthInfos[name] = a
	}
	out.AuthInfos[tenantUser] = tenant.AuthInfos[tenantUser]
	adm := admin.Contexts[admin.CurrentContext]
	out.Contexts[adminContext] = &clientcmdapi.Context{Cluster: adm.Cluster, AuthInfo: adm.AuthInfo, Namespace: "default"}
	out.Contexts[tenantUser] = &clientcmdapi.Context{Cluster: adm.Cluster, AuthInfo: tenantUser, Namespace: tenantNamespace}
	out.CurrentContext = adminContext
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("--write-kubeconfig: %w", err)
	}
	return clientcmd.WriteToFile(*out, path)
}
