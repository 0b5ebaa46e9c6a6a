// Command modproxy builds a module proxy in the file:// layout the go
// command reads (GOPROXY=file:///dir; see `go help goproxy`) from the tags
// of a git repository: for each module, <escaped path>/@v/list, and
// <version>.info, .mod and .zip. The zips are made by golang.org/x/mod/zip
// from the tagged tree, so they hold what the go command would fetch from
// the repository itself (nested modules and vendor directories left out,
// the checks on file names and sizes applied).
//
//	go run ./internal/tools/modproxy -repo DIR -version vX.Y.Z -out DIR [dir ...]
//	go run ./internal/tools/modproxy -repo DIR -version vX.Y.Z -rev REV -out DIR [dir ...]
//
// Each dir is a module directory relative to the repository ("." for the
// root module), tagged vX.Y.Z (root) or dir/vX.Y.Z, as scripts/release.sh
// tags them. With -rev, the modules are served at commit REV instead, under
// the pseudo-version the go command gives a commit after the vX.Y.Z tag
// (what `go get m@<commit>` resolves to); the last line printed is that
// version. scripts/installcheck.sh serves a made-up release this way and
// installs it as a user would.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", "", "the git repository holding the tags")
	version := flag.String("version", "", "the version every listed module is tagged with")
	out := flag.String("out", "", "the proxy directory to write")
	rev := flag.String("rev", "", "serve this commit, under its pseudo-version after -version, instead of the tags")
	flag.Parse()
	if *repo == "" || *version == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -repo DIR -version vX.Y.Z -out DIR module-dir...")
		os.Exit(2)
	}
	serve, ref := *version, ""
	if *rev != "" {
		pseudo, hash, err := pseudoVersion(*repo, *version, *rev)
		if err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %v\n", err)
			os.Exit(1)
		}
		serve, ref = pseudo, hash
	}
	for _, dir := range flag.Args() {
		path, err := add(*repo, serve, ref, *out, dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", dir, err)
			os.Exit(1)
		}
		fmt.Printf("modproxy: %s@%s\n", path, serve)
	}
	if *rev != "" {
		fmt.Println(serve)
	}
}

// pseudoVersion returns the pseudo-version of rev after the tag version,
// and rev's full hash.
func pseudoVersion(repo, version, rev string) (string, string, error) {
	out, err := git(repo, "log", "-1", "--format=%H %cI", rev)
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", "", fmt.Errorf("git log %s: %q", rev, out)
	}
	t, err := time.Parse(time.RFC3339, f[1])
	if err != nil {
		return "", "", err
	}
	return module.PseudoVersion("", version, t.UTC(), f[0][:12]), f[0], nil
}

// add writes one module's version into the proxy and returns its path.
// With ref set, the module is read at that commit rather than at its tag.
func add(repo, version, ref, out, dir string) (string, error) {
	dir = filepath.ToSlash(filepath.Clean(dir))
	tag, subdir := version, ""
	if dir != "." {
		tag, subdir = dir+"/"+version, dir
	}
	if ref != "" {
		tag = ref
	}
	gomod, err := git(repo, "show", tag+":"+filepath.ToSlash(filepath.Join(subdir, "go.mod")))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return "", fmt.Errorf("the go.mod at tag %s names no module", tag)
	}
	when, err := git(repo, "log", "-1", "--format=%cI", tag)
	if err != nil {
		return "", err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(when)))
	if err != nil {
		return "", err
	}
	esc, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}
	z, err := os.Create(filepath.Join(vdir, version+".zip"))
	if err != nil {
		return "", err
	}
	m := module.Version{Path: path, Version: version}
	if err := modzip.CreateFromVCS(z, m, repo, tag, subdir); err != nil {
		z.Close()
		return "", fmt.Errorf("zip from tag %s: %w", tag, err)
	}
	if err := z.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(vdir, version+".mod"), gomod, 0o644); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t.UTC()})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(vdir, version+".info"), info, 0o644); err != nil {
		return "", err
	}
	list := filepath.Join(vdir, "list")
	old, _ := os.ReadFile(list)
	if !bytes.Contains(old, []byte(version+"\n")) {
		if err := os.WriteFile(list, append(old, version+"\n"...), 0o644); err != nil {
			return "", err
		}
	}
	return path, nil
}

func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
