package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/packline/packline/test/webhookclient"
)

// kubeControllers are the kube-controller-manager controllers a Job needs to
// behave as in a real cluster: the Job controller makes pods and finishes
// Jobs, the garbage collector follows owner references, TTL-after-finished
// deletes old Jobs, the serviceaccount controller creates each namespace's
// "default" ServiceAccount (pod admission refuses pods whose ServiceAccount
// is missing), PVC protection lets a deleted PVC go once no pod uses it, and
// the namespace controller empties deleted namespaces.
var kubeControllers = []string{
	"job-controller",
	"garbage-collector-controller",
	"ttl-after-finished-controller",
	"serviceaccount-controller",
	"persistentvolumeclaim-protection-controller",
	"namespace-controller",
	// Creates the PVC of a generic ephemeral volume (a Job dispatched by
	// MultiKueue keeps its workspace in one) with its pod.
	"ephemeral-volume-controller",
	// For config/default deployed as pods: Deployments make ReplicaSets make
	// pods, and kube-root-ca.crt feeds the pods' ServiceAccount token volume.
	"deployment-controller",
	"replicaset-controller",
	"root-ca-certificate-publisher-controller",
	// The built-in admin, edit and view ClusterRoles are aggregated: without
	// this controller they hold no rules, and a tenant granted "edit" in
	// its namespace (docs/tutorials) could do nothing.
	"clusterrole-aggregation-controller",
	// Not the endpoints or endpointslice controllers: the process node's
	// pods have loopback addresses, which the API server refuses in
	// Endpoints and IPv4 EndpointSlices; the node publishes its pods behind
	// Services itself (procnode's network.go).
}

// controlPlane is etcd, kube-apiserver and kube-controller-manager.
type controlPlane struct {
	dir, assets string
	// realNode adds the PersistentVolume controllers (on the real node a
	// PVC is bound to a PersistentVolume, see volumes.go) and the node
	// lifecycle controller, which lifts the not-ready taint a kubelet
	// registers its Node with.
	realNode  bool
	log       io.Writer
	ca        *ca
	etcd      *proc
	apiserver *proc
	kcm       *proc
	host      string // https://127.0.0.1:port
	// webhookClient is the certificate the API server presents to
	// admission webhooks, and its CA (the manager's --webhook-client-ca).
	webhookClient webhookclient.Files
}

func (c *controlPlane) startEtcd() (string, error) {
	var last error
	for range 3 {
		client, err1 := freePort()
		peer, err2 := freePort()
		if err1 != nil || err2 != nil {
			return "", fmt.Errorf("no free port: %v %v", err1, err2)
		}
		url := "http://127.0.0.1:" + strconv.Itoa(client)
		p, err := startProc("etcd", c.log, nil, filepath.Join(c.assets, "etcd"),
			"--data-dir="+filepath.Join(c.dir, "etcd"),
			"--listen-client-urls="+url, "--advertise-client-urls="+url,
			"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(peer),
			"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(peer),
			"--initial-cluster=default=http://127.0.0.1:"+strconv.Itoa(peer),
			// A throwaway cluster: durability buys nothing and costs seconds.
			"--unsafe-no-fsync", "--log-level=error")
		if err != nil {
			return "", err
		}
		err = waitFor(p, 30*time.Second, func() error { return httpOK(http.DefaultClient, url+"/health") })
		if err == nil {
			c.etcd = p
			return url, nil
		}
		p.stop(time.Second)
		last = err
	}
	return "", last
}

func (c *controlPlane) startAPIServer(etcdURL string) error {
	pki := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	caPath := filepath.Join(pki, "ca.crt")
	if err := os.WriteFile(caPath, c.ca.certPEM, 0o600); err != nil {
		return err
	}
	cert, key, err := c.ca.issue("kube-apiserver", nil, true)
	if err != nil {
		return err
	}
	certPath, keyPath, err := writePair(pki, "apiserver", cert, key)
	if err != nil {
		return err
	}
	// The API server's client certificate towards kubelets: the process
	// node serves logs only to it (kubeletTLS).
	kcert, kkey, err := c.ca.issue(kubeletClientCN, nil, false)
	if err != nil {
		return err
	}
	kcertPath, kkeyPath, err := writePair(pki, "kubelet-client", kcert, kkey)
	if err != nil {
		return err
	}
	saKey := filepath.Join(pki, "sa.key")
	if err := serviceAccountKey(saKey); err != nil {
		return err
	}
	// The API server presents a client certificate of a CA of its own to
	// admission webhooks, as docs/operations/install.md sets it up.
	if c.webhookClient, err = webhookclient.Write(filepath.Join(pki, "webhook-client")); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.cert)
	probe := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}

	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return err
		}
		c.host = "https://127.0.0.1:" + strconv.Itoa(port)
		p, err := startProc("kube-apiserver", c.log, nil, filepath.Join(c.assets, "kube-apiserver"),
			"--etcd-servers="+etcdURL,
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(port),
			"--tls-cert-file="+certPath, "--tls-private-key-file="+keyPath,
			"--client-ca-file="+caPath,
			"--kubelet-client-certificate="+kcertPath, "--kubelet-client-key="+kkeyPath,
			// The process node's name does not resolve; its address does.
			"--kubelet-preferred-address-types=InternalIP",
			"--service-cluster-ip-range=10.0.0.0/24",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file="+saKey,
			"--service-account-signing-key-file="+saKey,
			// RBAC is on so that the manager runs with exactly the ClusterRole
			// it ships with; admin, node and controller-manager are masters.
			"--authorization-mode=RBAC",
			// Webhook Services resolve through their EndpointSlices, not
			// the ClusterIP: nothing routes Service IPs on this host. The
			// manager process and the process node's pods (see procnode's
			// endpoints) are reached on loopback addresses.
			"--enable-aggregator-routing=true",
			"--admission-control-config-file="+c.webhookClient.AdmissionConfig,
			"--anonymous-auth=true", // /readyz and /livez for the probe below
			"--v=0")
		if err != nil {
			return err
		}
		err = waitFor(p, 90*time.Second, func() error { return httpOK(probe, c.host+"/readyz") })
		if err == nil {
			c.apiserver = p
			return nil
		}
		p.stop(2 * time.Second)
		last = err
	}
	return last
}

func (c *controlPlane) startControllerManager() error {
	kc, err := c.writeKubeconfig("kube-controller-manager", "system:kube-controller-manager", []string{"system:masters"})
	if err != nil {
		return err
	}
	ctrls := ""
	names := kubeControllers
	if c.realNode {
		names = append(append([]string{}, names...), "persistentvolume-binder-controller", "persistentvolume-protection-controller", "node-lifecycle-controller",
			// Real pods have bridge addresses: the webhook Service of
			// config/default deployed as pods reaches them through slices.
			"endpointslice-controller")
	}
	for i, n := range names {
		if i > 0 {
			ctrls += ","
		}
		ctrls += n
	}
	p, err := startProc("kube-controller-manager", c.log, nil, filepath.Join(c.assets, "kube-controller-manager"),
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--controllers="+ctrls,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--cluster-name=packline-sandbox",
		// Seconds, not the default minutes: e2e runs wait on these.
		"--concurrent-job-syncs=10", "--concurrent-gc-syncs=20",
		"--v=0")
	if err != nil {
		return err
	}
	c.kcm = p
	return nil
}

// writeKubeconfig issues a client certificate for user/groups and writes a
// kubeconfig with everything embedded, so the file is self-contained.
func (c *controlPlane) writeKubeconfig(name, user string, groups []string) (string, error) {
	cert, key, err := c.ca.issue(user, groups, false)
	if err != nil {
		return "", err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: c.host, CertificateAuthorityData: c.ca.certPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = "sandbox"
	path := filepath.Join(c.dir, name+".kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// The defaults (5 qps) would make the harness, not packline, the
	// bottleneck of the 1,000-object benchmark.
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg, nil
}

func (c *controlPlane) stop() {
	for _, p := range []*proc{c.kcm, c.apiserver, c.etcd} {
		if p != nil {
			p.stop(10 * time.Second)
		}
	}
}

func httpOK(client *http.Client, url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// kubeletClientCN is the API server's kubelet client identity.
const kubeletClientCN = "kube-apiserver-kubelet-client"

// kubeletTLS is the process node's serving config for its log endpoint: a
// serving certificate of the sandbox CA, and only the API server's kubelet
// client certificate is let in, as a kubelet with x509 authentication
// and authorization lets in only who may read pods/log.
func (c *controlPlane) kubeletTLS() (*tls.Config, error) {
	certPEM, keyPEM, err := c.ca.issue("process-node", nil, true)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.cert)
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || chains[0][0].Subject.CommonName != kubeletClientCN {
				return errors.New("only the API server may read logs")
			}
			return nil
		},
	}, nil
}
