package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// modulePath is the module wsctl belongs to.
const modulePath = "github.com/wsstore/wsstore"

// buildInfo is what version prints: the module version and the commit the
// binary was built from, as the Go toolchain stamped them.
type buildInfo struct {
	Module   string `json:"module"`
	Version  string `json:"version"`            // "(devel)" for a build from a clone
	Revision string `json:"revision,omitempty"` // vcs.revision: the commit
	Time     string `json:"time,omitempty"`     // vcs.time: the commit's time
	Modified bool   `json:"modified"`           // vcs.modified: uncommitted changes in the build
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// currentBuild reads the build info stamped into the binary. A binary
// built by go build or go install in a git clone carries vcs.*; go run and
// go test do not, and a build outside a clone neither.
func currentBuild(readBuildInfo func() (*debug.BuildInfo, bool)) buildInfo {
	b := buildInfo{Module: modulePath, Version: "(unknown)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := readBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Path != "" {
		b.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		b.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line of wsctl --version.
func (b buildInfo) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "wsctl %s", b.Version)
	if b.Revision != "" {
		fmt.Fprintf(&s, " (commit %s", b.Revision)
		if b.Time != "" {
			fmt.Fprintf(&s, ", %s", b.Time)
		}
		if b.Modified {
			s.WriteString(", modified")
		}
		s.WriteString(")")
	} else {
		s.WriteString(" (no commit stamped: go run, -buildvcs=false, or a build outside a git clone)")
	}
	fmt.Fprintf(&s, " %s %s %s", b.Module, b.Go, b.Platform)
	return s.String()
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version wsctl was built with",
		Long: `version prints what the Go toolchain stamped into this binary: the module
version ("(devel)" when built from a clone), the commit (vcs.revision), its
time, whether the tree had uncommitted changes, and the Go version. With
--json it prints them as one object. "wsctl --version" prints the same line.
It never opens a store.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := currentBuild(a.readBuildInfo)
			if a.jsonFlag {
				return writeJSON(cmd.OutOrStdout(), b)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), b.String())
			return err
		},
	}
}
