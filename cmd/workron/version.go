package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/workron/workron/fsm"
)

// version is the release, set at build time by scripts/release
// (-ldflags "-X main.version=v1.2.3"); otherwise the module version that
// `go install ...@version` records, or "devel".
var version = ""

// commit and modified are the commit a release was built from and "true"
// if the tree had uncommitted changes, set by scripts/release (-X
// main.commit=... -X main.modified=true). Without them, the commit comes
// from the VCS stamp Go adds to builds in a git clone (-buildvcs), which
// it does not add in a git worktree nor with -buildvcs=false.
var commit, modified = "", ""

// buildInfo is what `workron version` prints.
type buildInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	Protocol int    `json:"protocol"`
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH, Protocol: fsm.ProtocolVersion}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			b.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if commit != "" {
		b.Commit, b.Modified = commit, modified == "true"
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// runVersion prints the version, commit, Go version and protocol.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "text", "output: text or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b := currentBuild()
	switch *out {
	case "json":
		return json.NewEncoder(stdout).Encode(b)
	case "text":
		commit := b.Commit
		if commit == "" {
			commit = "unknown"
		} else if b.Modified {
			commit += " (modified)"
		}
		fmt.Fprintf(stdout, "workron %s\ncommit:   %s\ngo:       %s %s\nprotocol: %d\n", b.Version, commit, b.Go, b.Platform, b.Protocol)
		return nil
	}
	return fmt.Errorf("version: -o must be text or json, not %q", *out)
}
