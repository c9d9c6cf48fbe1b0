package push

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	ggcr "github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote/auth"

	"github.com/packline/packline/jobs/registry"
)

// A streamed layer arrives whole, under the digest of what was written,
// both where the transport copies the body with WriteTo (HTTP/1.1) and
// where it reads it (HTTP/2 over TLS).
func TestStreamBlobSendsTheWholeLayer(t *testing.T) {
	layer := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16+7) // 3 MiB and a bit, several writes
	want := digest.FromBytes(layer)
	write := func(w io.Writer) error {
		for rest := layer; len(rest) > 0; {
			n := min(len(rest), 1<<20)
			if _, err := w.Write(rest[:n]); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	}

	plain := httptest.NewServer(ggcr.New())
	t.Cleanup(plain.Close)
	h2 := httptest.NewUnstartedServer(ggcr.New())
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)

	for name, srv := range map[string]*httptest.Server{"http/1.1": plain, "h2": h2} {
		for _, known := range []digest.Digest{"", want} {
			if known != "" {
				name += ", digest known"
			}
			t.Run(name, func(t *testing.T) {
				u, _ := url.Parse(srv.URL)
				repo := repoAt(t, u.Host, "stream/layer", registry.Options{})
				var proto string
				if srv == h2 {
					repo.PlainHTTP = false
					repo.Client = &auth.Client{Client: &http.Client{Transport: protoRecorder{srv.Client().Transport, &proto}}}
				}
				got, n, err := streamBlob(t.Context(), repo, write, known)
				if err != nil {
					t.Fatal(err)
				}
				if got != want || n != int64(len(layer)) {
					t.Errorf("pushed %s (%d bytes), want %s (%d)", got, n, want, len(layer))
				}
				if srv == h2 && proto != "HTTP/2.0" {
					t.Errorf("the TLS upload went over %q, want HTTP/2.0", proto)
				}
				rc, err := repo.Blobs().Fetch(t.Context(), descriptorOf(got, n))
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				b, _ := io.ReadAll(rc)
				if sha256.Sum256(b) != sha256.Sum256(layer) {
					t.Errorf("the registry holds other bytes than were written")
				}
			})
		}
	}
}

// A known digest that is wrong is refused by the registry and reported as
// errDigestMismatch (pushLayer then hashes while it sends); the registry
// holds nothing under it.
func TestStreamBlobKnownDigestMismatch(t *testing.T) {
	repo := repoAt(t, inProcess(t), "stream/mismatch", registry.Options{})
	wrong := digest.FromString("other bytes")
	_, _, err := streamBlob(t.Context(), repo, func(w io.Writer) error {
		_, err := w.Write(bytes.Repeat([]byte{7}, 2<<20))
		return err
	}, wrong)
	if !errors.Is(err, errDigestMismatch) {
		t.Fatalf("error %v, want errDigestMismatch", err)
	}
	if ok, err := repo.Blobs().Exists(t.Context(), descriptorOf(wrong, 2<<20)); err != nil || ok {
		t.Errorf("blob under the wrong digest exists: %v (%v)", ok, err)
	}
}

// A file that fails while its layer is sent fails the upload with its own
// error, not the transport's.
func TestStreamBlobReportsTheWritersError(t *testing.T) {
	vanished := errors.New("model.safetensors vanished")
	repo := repoAt(t, inProcess(t), "stream/fails", registry.Options{})
	_, _, err := streamBlob(t.Context(), repo, func(w io.Writer) error {
		if _, err := w.Write(make([]byte, 1<<20)); err != nil {
			return err
		}
		return vanished
	}, "")
	if !errors.Is(err, vanished) {
		t.Errorf("error %v, want the writer's", err)
	}
}

// A registry that answers an upload before reading it never gets a digest
// of part of the layer: the push fails.
func TestStreamBlobRefusesAnAnswerBeforeTheBody(t *testing.T) {
	reg := ggcr.New()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			w.Header().Set("Location", r.URL.Path)
			w.WriteHeader(http.StatusAccepted)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	repo := repoAt(t, u.Host, "stream/early", registry.Options{})
	big := bytes.Repeat([]byte{1}, 1<<20)
	_, _, err := streamBlob(t.Context(), repo, func(w io.Writer) error {
		for range 64 {
			if _, err := w.Write(big); err != nil {
				return err
			}
		}
		return nil
	}, "")
	if err == nil {
		t.Fatal("a digest for an upload the registry answered before reading it")
	}
	t.Logf("refused: %v", err)
}

// protoRecorder notes the protocol of the response to the request that
// carried the layer (the PATCH, or the PUT of a known digest).
type protoRecorder struct {
	rt    http.RoundTripper
	proto *string
}

func (p protoRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.rt.RoundTrip(r)
	if err == nil && r.Body != nil && r.Body != http.NoBody {
		*p.proto = resp.Proto
	}
	return resp, err
}

func descriptorOf(d digest.Digest, size int64) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: "application/octet-stream", Digest: d, Size: size}
}
