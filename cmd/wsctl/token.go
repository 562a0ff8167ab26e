package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/tokens"
)

type tokenOptions struct {
	globals
	actors   []string
	readOnly bool
	name     string
}

// newTokenCmd builds "wsctl token": the bearer tokens wsctl serve accepts.
func newTokenCmd(a *app) *cobra.Command {
	var o tokenOptions
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke the bearer tokens of wsctl serve",
		Long: `token manages the bearer tokens the HTTP API (wsctl serve) accepts. The
store keeps only each token's SHA-256: a token is shown once, when it is
created, on the last line of the output.

  wsctl token create [--actor A]... [--read-only] [--name N]
  wsctl token ls [--json]
  wsctl token revoke ID

A token limited to actors (--actor, repeatable) reaches only those actors'
spaces (/workspace/..., the actor.* ops), never a run; a read-only token
changes nothing. A revoked token is refused from the next request on.`,
	}
	create := &cobra.Command{Use: "create", Short: "Create a token and print it", Args: exactArgs(0)}
	create.RunE = a.runWith(&o.globals, func(ctx context.Context, args []string) error { return runTokenCreate(ctx, o, args) })
	create.Flags().StringArrayVar(&o.actors, "actor", nil, "limit the token to actor `A` (repeatable)")
	create.Flags().BoolVar(&o.readOnly, "read-only", false, "refuse every change")
	create.Flags().StringVar(&o.name, "name", "", "a label for the token")
	ls := &cobra.Command{Use: "ls", Short: "List tokens, revoked ones included", Args: exactArgs(0)}
	ls.RunE = a.runWith(&o.globals, func(ctx context.Context, args []string) error { return runTokenLs(ctx, o, args) })
	revoke := &cobra.Command{Use: "revoke ID", Short: "Revoke a token", Args: exactArgs(1)}
	revoke.RunE = a.runWith(&o.globals, func(ctx context.Context, args []string) error { return runTokenRevoke(ctx, o, args) })
	cmd.AddCommand(create, ls, revoke)
	return cmd
}

// tokenAccess describes what t may do, for people.
func tokenAccess(t tokens.Token) (actors, mode string) {
	actors = "all"
	if !t.AllActors() {
		actors = strings.Join(t.Actors, ",")
	}
	mode = "read-write"
	if t.ReadOnly {
		mode = "read-only"
	}
	return actors, mode
}

func runTokenCreate(ctx context.Context, o tokenOptions, _ []string) error {
	// Refused before a store is made where there is none.
	for _, a := range o.actors {
		if _, err := actors.ParseActor(a); err != nil {
			return cliArgError("token create", err)
		}
	}
	st, failed, err := openCreating(ctx, o.globals)
	if err != nil {
		return err
	}
	defer st.Close()
	t, secret, err := st.Tokens.Create(ctx, tokens.Spec{Name: o.name, Actors: o.actors, ReadOnly: o.readOnly})
	if err != nil {
		failed()
		return cliArgError("token create", err)
	}
	if o.json {
		return writeJSON(o.out, struct {
			tokens.Token
			Secret string `json:"token"`
		}{t, secret})
	}
	actors, mode := tokenAccess(t)
	fmt.Fprintf(o.out, "created token %s (actors: %s, %s); it is shown only now:\n%s\n", t.ID, actors, mode, secret)
	return nil
}

func runTokenLs(ctx context.Context, o tokenOptions, _ []string) error {
	st, err := openStore(ctx, o.globals, readOnly)
	if err != nil {
		return err
	}
	defer st.Close()
	ts, err := st.Tokens.List(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, ts)
	}
	tb := newTable(o.out, "ID", "NAME", "ACTORS", "ACCESS", "CREATED", "REVOKED")
	for _, t := range ts {
		actors, mode := tokenAccess(t)
		revoked := ""
		if t.Revoked != nil {
			revoked = t.Revoked.Format(time.RFC3339)
		}
		tb.row(t.ID, t.Name, actors, mode, t.Created.Format(time.RFC3339), revoked)
	}
	return tb.flush()
}

func runTokenRevoke(ctx context.Context, o tokenOptions, args []string) error {
	st, err := openStore(ctx, o.globals, readWrite)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Tokens.Revoke(ctx, args[0]); err != nil {
		return err
	}
	if o.json {
		return writeJSON(o.out, map[string]any{"revoked": args[0]})
	}
	fmt.Fprintf(o.out, "revoked token %s\n", args[0])
	return nil
}
