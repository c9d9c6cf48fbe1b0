package admission

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
)

// shippedConfigurations are config/webhook's two configurations, as
// generated from the markers.
func shippedConfigurations(t *testing.T) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(b, []byte("\n---\n"))
	m, v := &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, d := range docs {
		switch {
		case bytes.Contains(d, []byte("kind: MutatingWebhookConfiguration")):
			err = yaml.Unmarshal(d, m)
		case bytes.Contains(d, []byte("kind: ValidatingWebhookConfiguration")):
			err = yaml.Unmarshal(d, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return m, v
}

func testCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "x"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: isCA, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Seals are trusted only while the webhook configurations send every
// create and update of both kinds through the webhooks, with a CA that
// trusts the certificate the manager serves.
func TestCheckConfigurations(t *testing.T) {
	ca, caKey, caPEM := testCert(t, nil, nil, true)
	serving, _, _ := testCert(t, ca, caKey, false)
	_, _, otherCA := testCert(t, nil, nil, true)
	cases := []struct {
		name   string
		mutate func(*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration)
		want   []string
	}{
		{name: "as shipped"},
		{name: "a webhook removed", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks = m.Webhooks[:1]
		}, want: []string{"has no webhook"}},
		{name: "failurePolicy Ignore", mutate: func(_ *admissionregistrationv1.MutatingWebhookConfiguration, v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}, want: []string{"failurePolicy is Ignore, not Fail"}},
		{name: "object selector", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks[1].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"webhook": "on"}}
		}, want: []string{"objectSelector"}},
		{name: "namespace selector", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpDoesNotExist}}}
		}, want: []string{"namespaceSelector"}},
		{name: "empty selectors, as the API server defaults them", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks[0].NamespaceSelector, m.Webhooks[0].ObjectSelector = &metav1.LabelSelector{}, &metav1.LabelSelector{}
		}},
		{name: "match conditions", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "skip", Expression: "false"}}
		}, want: []string{"matchConditions"}},
		{name: "UPDATE left out", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
		}, want: []string{"no rule sends UPDATE"}},
		{name: "wildcards cover", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
			m.Webhooks[0].Rules[0].Resources = []string{"*"}
		}},
		{name: "another path", mutate: func(m *admissionregistrationv1.MutatingWebhookConfiguration, _ *admissionregistrationv1.ValidatingWebhookConfiguration) {
			m.Webhooks[0].ClientConfig.Service.Path = ptr.To("/healthz")
		}, want: []string{`calls path "/healthz"`}},
		{name: "another CA", mutate: func(_ *admissionregistrationv1.MutatingWebhookConfiguration, v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks[1].ClientConfig.CABundle = otherCA
		}, want: []string{"caBundle does not verify the webhook server's certificate"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, v := shippedConfigurations(t)
			for i := range m.Webhooks {
				m.Webhooks[i].ClientConfig.CABundle = caPEM
			}
			for i := range v.Webhooks {
				v.Webhooks[i].ClientConfig.CABundle = caPEM
			}
			if tc.mutate != nil {
				tc.mutate(m, v)
			}
			err := CheckConfigurations(m, v, serving)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("trusted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
		})
	}
}
