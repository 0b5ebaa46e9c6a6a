package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/acemq-go/acemq/cmd/acemq/internal/docscheck"
	"github.com/acemq-go/acemq/cmd/acemq/internal/testenv"
)

// TestDocsNameOnlyRealSubcommandsAndFlags reads every acemq command line
// in the README's and docs/'s shell blocks and inline code (`acemq …`,
// `go run ./cmd/acemq …`) and checks its subcommands and flags against the
// command tree newRoot builds, so the manual cannot name a subcommand or a
// flag the command does not have. (internal/docscheck checks the rest of
// each line: make targets, directories, scripts.)
func TestDocsNameOnlyRealSubcommandsAndFlags(t *testing.T) {
	root := testenv.RepoRoot(t)
	pages, err := docscheck.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	targets, err := docscheck.MakeTargets(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pages {
		if p == "CHANGELOG.md" {
			continue
		}
		path := filepath.Join(root, p)
		blocks, err := docscheck.Blocks(path)
		if err != nil {
			t.Fatal(err)
		}
		var cmds []docscheck.Command
		for _, b := range blocks {
			if b.Lang == "sh" {
				cmds = append(cmds, docscheck.ShellCommands(b)...)
			}
		}
		inline, err := docscheck.InlineCommands(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range append(cmds, inline...) {
			c.File = p
			args, ok, err := docscheck.CheckCommand(root, targets, c)
			if err != nil || !ok {
				continue // internal/docscheck's test reports these
			}
			n++
			if err := checkCommandLine(newRoot(), args); err != nil {
				t.Errorf("%s: %v", c, err)
			}
		}
	}
	if n == 0 {
		t.Fatal("found no acemq command line in the docs; is the parser broken?")
	}
}

// TestCheckCommandLineRefusesWhatDoesNotExist makes sure the check above
// can fail.
func TestCheckCommandLineRefusesWhatDoesNotExist(t *testing.T) {
	for _, args := range [][]string{
		{"dlq", "shwo", "Q"},
		{"dlq", "show", "Q", "--no-such-flag"},
		{"demo", "--consol"},
		{"tail", "Q", "--ack|--requeued"},
	} {
		if err := checkCommandLine(newRoot(), args); err == nil {
			t.Errorf("acemq %s passed the check", strings.Join(args, " "))
		}
	}
	for _, args := range [][]string{
		{"demo", "--console"},
		{"dlq", "show", "Q", "-n", "N"},
		{"tail", "Q", "--ack|--requeue"},
		{"topology", "plan|apply", "-f", "topology.yaml"},
	} {
		if err := checkCommandLine(newRoot(), args); err != nil {
			t.Errorf("acemq %s: %v", strings.Join(args, " "), err)
		}
	}
}

// checkCommandLine walks args down root's subcommands (a word a|b names
// two) and looks every flag up on the command reached.
func checkCommandLine(root *cobra.Command, args []string) error {
	cmd := root
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") || !cmd.HasSubCommands() {
			break
		}
		var next *cobra.Command
		for _, alt := range strings.Split(a, "|") {
			sub := subcommand(cmd, alt)
			if sub == nil {
				if cmd.Runnable() || strings.ToLower(a) != a {
					return nil // a positional argument or a placeholder
				}
				return fmt.Errorf("%q has no subcommand %q", cmd.CommandPath(), alt)
			}
			next = sub
		}
		cmd = next
	}
	for _, a := range args[i:] {
		for _, alt := range strings.Split(a, "|") {
			if !strings.HasPrefix(alt, "-") || alt == "-" || alt == "--" {
				continue
			}
			if err := lookupFlag(cmd, alt); err != nil {
				return err
			}
		}
	}
	return nil
}

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

func lookupFlag(cmd *cobra.Command, arg string) error {
	name, _, _ := strings.Cut(arg, "=")
	sets := []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), cmd.InheritedFlags()}
	if strings.HasPrefix(name, "--") {
		name = strings.TrimPrefix(name, "--")
		if name == "help" {
			return nil
		}
		for _, s := range sets {
			if s.Lookup(name) != nil {
				return nil
			}
		}
		return fmt.Errorf("%q has no flag --%s", cmd.CommandPath(), name)
	}
	short := strings.TrimPrefix(name, "-")
	if short == "h" {
		return nil
	}
	for _, s := range sets {
		if len(short) == 1 && s.ShorthandLookup(short) != nil {
			return nil
		}
	}
	return fmt.Errorf("%q has no flag -%s", cmd.CommandPath(), short)
}
