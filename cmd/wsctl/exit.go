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

// exitCode maps err to its exit status: 2 for a usage error, else through
// exitStatuses.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	if errors.As(err, &ue) {
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
