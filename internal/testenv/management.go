package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Management calls the test node's management HTTP API (much faster than
// rabbitmqctl, which starts an Erlang VM per call) with body as JSON when
// not nil, fails t on any answer but 2xx (a DELETE may also find nothing:
// 404), and decodes a JSON answer into out when out is not nil.
func Management(t testing.TB, method, path string, body, out any) {
	t.Helper()
	u, err := url.Parse(ManagementURL(t))
	if err != nil {
		t.Fatal(err)
	}
	user := u.User
	u.User = nil
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(u.String(), "/")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	req.Header.Set("Content-Type", "application/json")
	// No keep-alive: no idle connection outlives the test (goleak).
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 15 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("management API %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 && !(method == http.MethodDelete && resp.StatusCode == http.StatusNotFound) {
		t.Fatalf("management API %s %s: %s %s", method, path, resp.Status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("management API %s %s: %v in %s", method, path, err, data)
		}
	}
}

// BrokerUser creates a user on the test node with every permission on "/"
// (no password when password is empty: it can then log in only with
// EXTERNAL) and deletes it at cleanup.
func BrokerUser(t testing.TB, name, password string) {
	t.Helper()
	body := map[string]any{"tags": ""}
	if password == "" {
		body["password_hash"] = ""
	} else {
		body["password"] = password
	}
	Management(t, http.MethodPut, "/api/users/"+url.PathEscape(name), body, nil)
	t.Cleanup(func() { Management(t, http.MethodDelete, "/api/users/"+url.PathEscape(name), nil, nil) })
	Management(t, http.MethodPut, "/api/permissions/%2F/"+url.PathEscape(name), map[string]string{"configure": ".*", "write": ".*", "read": ".*"}, nil)
}
