package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
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
	expires  string
	// expiresSet: --expires was given, so an empty value is a mistake,
	// not "until revoked".
	expiresSet bool
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

  wsctl token create [--actor A]... [--read-only] [--name N] [--expires D]
  wsctl token ls [--json]
  wsctl token revoke ID

A token limited to actors (--actor, repeatable) reaches only those actors'
spaces (/workspace/..., the actor.* ops), never a run; a read-only token
changes nothing. A token created with --expires (a duration: 90m, 12h,
30d) is refused once that long has passed; without it, it is valid until
revoked. A revoked or expired token is refused from the next request on.`,
	}
	create := &cobra.Command{Use: "create", Short: "Create a token and print it", Args: exactArgs(0)}
	create.RunE = a.runWith(&o.globals, func(ctx context.Context, args []string) error {
		o.expiresSet = create.Flags().Changed("expires")
		return runTokenCreate(ctx, o, args)
	})
	create.Flags().StringArrayVar(&o.actors, "actor", nil, "limit the token to actor `A` (repeatable)")
	create.Flags().BoolVar(&o.readOnly, "read-only", false, "refuse every change")
	create.Flags().StringVar(&o.name, "name", "", "a label for the token (at most 256 bytes of UTF-8, no control characters)")
	create.Flags().StringVar(&o.expires, "expires", "", "how long the token is valid, `D`: a duration such as 90m, 12h or 30d (default: until revoked)")
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

// parseLifetime reads --expires: a Go duration (90m, 12h) or whole days
// (30d), more than zero.
func parseLifetime(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		d = time.Duration(n) * 24 * time.Hour
		if err == nil && (n > math.MaxInt64/int64(24*time.Hour) || n < 0) {
			err = errors.New("out of range")
		}
	}
	if err != nil || d <= 0 {
		return 0, argError("token create", "--expires %q is not a duration past zero such as 90m, 12h or 30d", s)
	}
	return d, nil
}

func runTokenCreate(ctx context.Context, o tokenOptions, _ []string) error {
	// Refused before a store is made where there is none.
	for _, a := range o.actors {
		if _, err := actors.ParseActor(a); err != nil {
			return cliArgError("token create", err)
		}
	}
	ttl, err := parseLifetime(o.expires)
	if err == nil && o.expiresSet && ttl == 0 {
		err = argError("token create", "--expires %q is not a duration past zero such as 90m, 12h or 30d", o.expires)
	}
	if err != nil {
		return err
	}
	st, failed, err := openCreating(ctx, o.globals)
	if err != nil {
		return err
	}
	defer st.Close()
	t, secret, err := st.Tokens.Create(ctx, tokens.Spec{Name: o.name, Actors: o.actors, ReadOnly: o.readOnly, TTL: ttl})
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
	if t.Expires != nil {
		mode += ", expires " + t.Expires.Format(time.RFC3339)
	}
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
	tb := newTable(o.out, "ID", "NAME", "ACTORS", "ACCESS", "CREATED", "EXPIRES", "REVOKED")
	now := time.Now()
	for _, t := range ts {
		actors, mode := tokenAccess(t)
		expires, revoked := "", ""
		if t.Expires != nil {
			expires = t.Expires.Format(time.RFC3339)
			if t.Expired(now) {
				expires += " (expired)"
			}
		}
		if t.Revoked != nil {
			revoked = t.Revoked.Format(time.RFC3339)
		}
		tb.row(t.ID, t.Name, actors, mode, t.Created.Format(time.RFC3339), expires, revoked)
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
