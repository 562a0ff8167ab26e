package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// exitStatuses is the one table that maps error codes to exit statuses,
// the protocol's; the help text is generated from it.
var exitStatuses = protocol.ExitStatuses

// hostGoneError is a write to the host that failed because the host
// closed its end of the pipe (batch's standard output): no failure of
// the store, and there is no one left to tell, so wsctl prints nothing
// and exits with status 2.
type hostGoneError struct{ err error }

func (e hostGoneError) Error() string { return e.err.Error() }
func (e hostGoneError) Unwrap() error { return e.err }

// exitCode maps err to its exit status: 2 for a usage error or a host
// gone, else through exitStatuses.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	var hg hostGoneError
	if errors.As(err, &ue) || errors.As(err, &hg) {
		return 2
	}
	return protocol.ExitStatus(wserr.CodeOf(err))
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
