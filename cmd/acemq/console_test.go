package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acemq-go/acemq"
)

// consoleBanner starts serveConsole with f on a memory:// broker, reads
// its banner (which ends with the parenthesised line saying how to stop
// it), stops it and returns everything it printed, the banner and anything
// after it.
func consoleBanner(t *testing.T, f consoleFlags) string {
	t.Helper()
	u := "memory://" + strings.ReplaceAll(t.Name(), "/", "-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := acemq.Connect(ctx, u, acemq.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	pr, pw := io.Pipe()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- serveConsole(sctx, pw, io.Discard, c, u, f)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "(") {
			break
		}
	}
	stop()
	// The rest, up to serveConsole's return (pw is closed then), so that
	// nothing it prints is left unchecked.
	rest, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n") + "\n" + string(rest)
}

// A token given with --token or $ACEMQ_CONSOLE_TOKEN is never printed (it
// would end up in journald or a pod log); a generated one is.
func TestConsolePrintsOnlyAGeneratedToken(t *testing.T) {
	given := "given-token-0123456789abcdef"
	out := consoleBanner(t, consoleFlags{listen: "127.0.0.1:0", token: given})
	if strings.Contains(out, given) || strings.Contains(out, "token=") || !strings.Contains(out, "http://127.0.0.1:") {
		t.Fatalf("with --token the console printed:\n%s", out)
	}
	out = consoleBanner(t, consoleFlags{listen: "127.0.0.1:0"})
	if !regexp.MustCompile(`console: http://127\.0\.0\.1:\d+/sign-in#code=[0-9a-f]{32}\ntoken: [0-9a-f]{32}\n`).MatchString(out) || strings.Contains(out, "token=") {
		t.Fatalf("with no token the console did not print a one-time link and the generated token apart:\n%s", out)
	}
}
