package regtest

import (
	"net/http"
	"testing"
	"time"
)

func status(t *testing.T, url, user, pass string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestStartStopRestart(t *testing.T) {
	r := StartWith(t, Options{})
	url := "http://" + r.Host + "/v2/"
	if got := status(t, url, "", ""); got != http.StatusOK {
		t.Fatalf("GET /v2/ = %d, want 200", got)
	}
	r.Stop()
	if got := status(t, url, "", ""); got != 0 {
		t.Fatalf("stopped registry answered %d", got)
	}
	r.Restart()
	if got := status(t, url, "", ""); got != http.StatusOK {
		t.Fatalf("after restart GET /v2/ = %d, want 200", got)
	}
}

func TestHtpasswd(t *testing.T) {
	r := StartWith(t, Options{Users: map[string]string{"alice": "s3cret"}})
	url := "http://" + r.Host + "/v2/"
	cases := []struct {
		name, user, pass string
		want             int
	}{
		{"anonymous", "", "", http.StatusUnauthorized},
		{"wrong password", "alice", "nope", http.StatusUnauthorized},
		{"right password", "alice", "s3cret", http.StatusOK},
	}
	for _, tc := range cases {
		if got := status(t, url, tc.user, tc.pass); got != tc.want {
			t.Errorf("%s: GET /v2/ = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestProxyCounts(t *testing.T) {
	host, c := Proxy(t, Start(t))
	if got := status(t, "http://"+host+"/v2/", "", ""); got != http.StatusOK {
		t.Fatalf("through proxy GET /v2/ = %d", got)
	}
	if c.Requests() != 1 || c.Uploaded() != 0 {
		t.Fatalf("counter = %d requests, %d bytes; want 1, 0", c.Requests(), c.Uploaded())
	}
}
