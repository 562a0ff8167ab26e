package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wsstore/wsstore/wserr"
)

// exitStatus is one row of the exit-status table: the status, what it
// means, and the error codes that map to it (exact codes first, then code
// prefixes).
type exitStatus struct {
	Status   int
	Meaning  string
	Codes    []wserr.Code
	Prefixes []string
}

// exitStatuses is the one table that maps error codes to exit statuses; the
// help text is generated from it. Codes not listed map to 1.
var exitStatuses = []exitStatus{
	{0, "ok", nil, nil},
	{1, "internal or unexpected error", []wserr.Code{wserr.Internal, wserr.JournalFailed}, nil},
	{2, "usage: bad command line, invalid argument or --store", []wserr.Code{wserr.InvalidArgument, wserr.InvalidOptions}, nil},
	{3, "not found: store, run, checkpoint or file", []wserr.Code{wserr.NotFound, wserr.RunNotFound, wserr.CheckpointNotFound, wserr.FileNotFound}, nil},
	{4, "model-correctable workspace error: bad path, not visible or writable, patch mismatch, …", nil, []string{"workspace."}},
	{5, "conflict or invalid transition (active run, run exists, non-empty dir)", []wserr.Code{wserr.InvalidState, wserr.RunExists, wserr.Conflict, wserr.PersistentWorkspaceConflict}, nil},
	{6, "corruption: fsck found problems, or the store is damaged", []wserr.Code{wserr.Corrupt}, nil},
	{7, "store format: written by a newer wsstore (upgrade wsctl), or an older one a read-only open cannot upgrade", []wserr.Code{wserr.NewerFormat, wserr.OlderFormat}, nil},
	{8, "store busy or read-only (sql refuses writes with this status)", []wserr.Code{wserr.Busy, wserr.ReadOnly}, nil},
	{9, "manifest invalid, required artifact missing, or chat sink failed", []wserr.Code{wserr.InvalidManifest, wserr.MissingArtifact, wserr.SinkFailed}, nil},
	// 128 + SIGINT's number, as shells report a process SIGINT ended.
	{130, "interrupted: stopped by SIGINT or SIGTERM", []wserr.Code{codeInterrupted, codeStopped}, nil},
}

// exitCode maps err to its exit status through exitStatuses.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	code := wserr.CodeOf(err)
	for _, s := range exitStatuses {
		if slices.Contains(s.Codes, code) {
			return s.Status
		}
	}
	for _, s := range exitStatuses {
		for _, p := range s.Prefixes {
			if strings.HasPrefix(string(code), p) {
				return s.Status
			}
		}
	}
	return 1
}

// exitStatusHelp renders exitStatuses for --help.
func exitStatusHelp() string {
	var b strings.Builder
	b.WriteString("Exit status:\n")
	for _, s := range exitStatuses {
		var codes []string
		for _, c := range s.Codes {
			codes = append(codes, string(c))
		}
		for _, p := range s.Prefixes {
			codes = append(codes, p+"*")
		}
		fmt.Fprintf(&b, "  %d  %s\n", s.Status, s.Meaning)
		if len(codes) > 0 {
			fmt.Fprintf(&b, "       %s\n", strings.Join(codes, ", "))
		}
	}
	b.WriteString("  Errors print as \"wsctl: op path: code: message\" on stderr.")
	return b.String()
}
