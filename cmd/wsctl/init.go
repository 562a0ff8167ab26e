package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newInitCmd(a *app) *cobra.Command {
	var g globals
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "Create an empty store (in DIR, else the --store or default one)",
		Long: `init creates an empty store in DIR, else in the store --store names, else in
the default store ($WSSTORE_DIR, else <user data dir>/wsstore): the
directory (and its parents) and the database file with the current schema.

On a directory that already holds a store it changes nothing and says so
(a store an older wsctl wrote is brought to the current schema, as any
writing command would), so it is safe to run again. DIR must not be a
file.`,
		Args: rangeArgs(0, 1),
		RunE: a.runWith(&g, func(ctx context.Context, args []string) error {
			if len(args) == 1 {
				g.storeDir = args[0]
			}
			return runInit(ctx, g)
		}),
	}
}

// initResult is init's --json output.
type initResult struct {
	Store   string `json:"store"`
	Created bool   `json:"created"`
	Runs    int    `json:"runs"`
}

func runInit(ctx context.Context, g globals) error {
	if g.storeDir == "" {
		return argError("init", "empty store directory")
	}
	res := initResult{Store: g.storeDir, Created: storeExists(g.storeDir) != nil}
	st, err := openStore(ctx, g, create)
	if err != nil {
		return err
	}
	defer st.Close()
	ids, err := runIDs(ctx, st)
	if err != nil {
		return err
	}
	res.Runs = len(ids)
	if g.json {
		return writeJSON(g.out, res)
	}
	if res.Created {
		_, err = fmt.Fprintf(g.out, "created an empty store in %s\nnext: wsctl batch (a host drives it) | wsctl demo --store ./demo-store (a sample run to look at, kept apart)\n", g.storeDir)
		return err
	}
	_, err = fmt.Fprintf(g.out, "%s already holds a store (%d run%s): nothing changed\n", g.storeDir, res.Runs, plural(int64(res.Runs)))
	return err
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain
// path characters, so a printed command can be pasted as is.
func shellQuote(s string) string {
	plain := s != ""
	for _, c := range s {
		if !(c == '/' || c == '.' || c == '-' || c == '_' || c == ':' || c == '+' || c == ',' || c == '=' || c == '@' ||
			c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
