package redact

import (
	"strings"
	"testing"
)

func TestURLNeverShowsAPasswordParseableOrNot(t *testing.T) {
	for _, c := range []struct {
		in, want string
		secrets  []string // none may appear in the result
	}{
		{"amqp://app:s3cret@host:5672/vh", "amqp://app:***@host:5672/vh", []string{"s3cret"}},
		{"amqps://app:s3cret@host:5671/?heartbeat=10", "amqps://app:***@host:5671/?heartbeat=10", []string{"s3cret"}},
		{"amqp://user:pa ss@host", "amqp://user:***@host", []string{"pa ss", "pa"}},
		{"amqp://user:p%zz@host", "amqp://user:***@host", []string{"p%zz"}},
		{"amqp://user:p@ss@host/", "amqp://user:***@host/", []string{"p@ss"}},
		{"amqp://user:pa/ss@host/vh", "amqp://user:***@host/vh", []string{"pa/ss"}},
		{"amqp://user:12/ss@host", "amqp://user:***@host", []string{"12/ss"}}, // url.Parse reads host "user", port 12
		{"amqp://user:p?ss#x@host", "amqp://user:***@host", []string{"p?ss"}},
		{"amqp://user:a:b:c@host", "amqp://user:***@host", []string{"a:b:c"}},
		{"amqp://user:pa,ss@host", "amqp://user:***@host", []string{"pa,ss"}},
		{"amqp://user:p%40ss@host", "amqp://user:***@host", []string{"p%40ss"}},
		{"amqp://a:one@h1:5672,amqp://b:two@h2:5672", "amqp://a:***@h1:5672,amqp://b:***@h2:5672", []string{"one", "two"}},
		{"amqp://a:one@h1, amqps://b:two@h2", "amqp://a:***@h1, amqps://b:***@h2", []string{"one", "two"}},
		{"amqp://a:one@h1,a:two@h2", "amqp://a:***@h2", []string{"one", "two"}},
		{"amqp://host:5672/", "amqp://host:5672/", nil},
		{"amqp://guest@host", "amqp://guest@host", nil},
		{"amqp://:pw@host", "amqp://:***@host", []string{"pw"}},
		{"memory://demo", "memory://demo", nil},
		{"postgres://u:pg-pass@db:5432/app?sslmode=disable", "postgres://u:***@db:5432/app?sslmode=disable", []string{"pg-pass"}},
		{"u:my-pass@tcp(db:3306)/app", "***@tcp(db:3306)/app", []string{"my-pass"}},
		{"mysql:u:my-pass@tcp(db:3306)/app", "***@tcp(db:3306)/app", []string{"my-pass"}},
		{"sqlite:/tmp/a.db", "sqlite:/tmp/a.db", nil},
		{"not a url", "not a url", nil},
		{"", "", nil},
		{"amqp://u:p@host/v@h", "amqp://u:***@h", []string{"p@host"}}, // an @ in the path: the host goes too
	} {
		got := URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, s := range c.secrets {
			if strings.Contains(got, s) {
				t.Errorf("URL(%q) = %q shows %q", c.in, got, s)
			}
		}
	}
}

// Whatever the password holds (short of "://", which starts an address),
// it does not appear in what URL shows.
func FuzzURLHidesThePassword(f *testing.F) {
	for _, s := range []string{"s3cret", "pa ss", "p%zz", "p@ss", "pa/ss", "a:b", "p?x#y", "x,y", "ümlaut"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		const host = "@h.example:5672/vh"
		if len(pw) < 3 || strings.Contains(pw, "://") || strings.Contains("amqp://u:"+Mask+host, pw) {
			t.Skip()
		}
		for _, raw := range []string{"amqp://u:" + pw + host, "amqp://a:x@h1,amqp://u:" + pw + host} {
			if got := URL(raw); strings.Contains(got, pw) {
				t.Fatalf("URL(%q) = %q shows the password", raw, got)
			}
		}
	})
}
