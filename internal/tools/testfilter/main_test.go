package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	const pkg = `"Package":"example.com/p"`
	ev := func(s string) string { return "{" + pkg + "," + s + "}\n" }
	cases := []struct {
		name     string
		in       string
		label    string // -label
		wantCode int
		want     []string // substrings of the output
		notWant  []string
	}{
		{
			name: "passing tests print only the package line",
			in: ev(`"Action":"run","Test":"TestA"`) +
				ev(`"Action":"output","Test":"TestA","Output":"=== RUN   TestA\n"`) +
				ev(`"Action":"output","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"`) +
				ev(`"Action":"pass","Test":"TestA"`) +
				ev(`"Action":"output","Output":"PASS\n"`) +
				ev(`"Action":"output","Output":"ok  \texample.com/p\t0.01s\n"`) +
				ev(`"Action":"pass"`),
			want:    []string{"ok  \texample.com/p\t0.01s\n"},
			notWant: []string{"=== RUN", "--- PASS", "PASS\n\n"},
		},
		{
			name: "a failing test's output is printed",
			in: ev(`"Action":"output","Test":"TestB","Output":"    b_test.go:3: boom\n"`) +
				ev(`"Action":"output","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"`) +
				ev(`"Action":"fail","Test":"TestB"`) +
				ev(`"Action":"output","Output":"FAIL\texample.com/p\t0.01s\n"`) +
				ev(`"Action":"fail"`),
			want: []string{"boom", "--- FAIL: TestB", "FAIL\texample.com/p"},
		},
		{
			name: "an ordinary skip is fine",
			in: ev(`"Action":"output","Test":"TestC","Output":"    c_test.go:3: slow test\n"`) +
				ev(`"Action":"skip","Test":"TestC"`) +
				ev(`"Action":"output","Output":"ok  \texample.com/p\t0.01s\n"`),
			notWant: []string{"slow test"},
		},
		{
			name: "a skip naming a service variable fails the run",
			in: ev(`"Action":"output","Test":"TestD","Output":"    d_test.go:3: ACEMQ_TEST_AMQP_URL is not set\n"`) +
				ev(`"Action":"skip","Test":"TestD"`) +
				ev(`"Action":"output","Output":"ok  \texample.com/p\t0.01s\n"`),
			wantCode: 1,
			want:     []string{"ACEMQ_TEST_AMQP_URL is not set", "example.com/p TestD"},
		},
		{
			name:  "the closing line names what the tests ran on",
			label: "RabbitMQ 4.3.6",
			in: ev(`"Action":"pass","Test":"TestE"`) +
				ev(`"Action":"output","Output":"ok  \texample.com/p\t0.01s\n"`),
			want: []string{"tests: 1 passed, 0 failed, 0 skipped on RabbitMQ 4.3.6\n"},
		},
		{
			name:    "non-JSON lines and build output pass through",
			in:      "go: downloading x\n" + `{"ImportPath":"example.com/p","Action":"build-output","Output":"p.go:1: syntax error\n"}` + "\n",
			want:    []string{"go: downloading x", "syntax error"},
			notWant: []string{"ImportPath"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			code := runOn(strings.NewReader(tc.in), &out, tc.label)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.wantCode, out.String())
			}
			for _, s := range tc.want {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(out.String(), s) {
					t.Errorf("output has %q:\n%s", s, out.String())
				}
			}
		})
	}
}
