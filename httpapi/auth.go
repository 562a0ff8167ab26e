package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/wserr"
)

// access is what a request needs of its token.
type access struct {
	write bool
	// actor is the actor space the request touches; with store false.
	actor string
	// store: the request reaches beyond one named actor (runs, every
	// actor's gc): only a token limited to no actors may.
	store bool
	// spaces: the request reads across the actor spaces, each token
	// seeing its own actors' (a listing or stats without an actor).
	spaces bool
	// anyToken: any valid token may (help, a refusal of its own).
	anyToken bool
	// op is the protocol op a /v1/op request names, if any, and id the
	// id it carries, echoed in the answer.
	op string
	id json.RawMessage
	// fileBytes is the size of the file an actor.upload op carries.
	fileBytes int64
	// largeList: a listing op whose page may hold more than
	// MaxListEntriesUnturned entries (listOps).
	largeList bool
	// unreadable: the /v1/op body is not a JSON object with a string op,
	// so it names nothing that could run.
	unreadable bool
}

// authorize authenticates r's bearer token and checks it allows a; on
// refusal it answers 401 or 403 and returns false. It runs before the
// request touches anything else.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, a access) (tokens.Token, bool) {
	t, err := h.authenticate(r)
	if err == nil {
		if lw, ok := w.(*logWriter); ok {
			lw.token = t.ID
		}
		err = permit(t, a)
	}
	if err != nil {
		writeError(w, err)
		return tokens.Token{}, false
	}
	return t, true
}

// authenticate returns the token of r's Authorization header. Errors:
// wserr.Unauthorized, or the store's.
func (h *Handler) authenticate(r *http.Request) (tokens.Token, error) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return tokens.Token{}, wserr.New(wserr.Unauthorized, "auth", "", "a bearer token is required (Authorization: Bearer wst_…; wsctl token create makes one)")
	}
	var t tokens.Token
	err := h.retry(r.Context(), func() (err error) {
		t, err = h.b.Tokens.Verify(r.Context(), strings.TrimSpace(tok))
		return err
	})
	return t, err
}

// permit checks that t allows a. Errors: wserr.Forbidden.
func permit(t tokens.Token, a access) error {
	if a.write && t.ReadOnly {
		return forbidden("this token is read-only")
	}
	if t.AllActors() || a.anyToken || a.spaces {
		return nil
	}
	if a.store {
		return forbidden("this token is limited to actors %s", strings.Join(t.Actors, ", "))
	}
	if a.actor == "" {
		// A request that names no actor where it must touches no space:
		// it is refused (workspace.invalid_actor) as for every token.
		return nil
	}
	if !t.AllowsActor(a.actor) {
		return forbidden("this token may not touch actor %q", a.actor)
	}
	return nil
}
