package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Prefix starts every token, so a leaked one is easy to recognise.
const Prefix = "wst_"

// DB runs transactions; *index.DB implements it.
type DB interface {
	View(ctx context.Context, fn func(tx *index.Tx) error) error
	Update(ctx context.Context, fn func(tx *index.Tx) error) error
}

// Store is the token table of one store. It holds no state beyond its
// database, so it is safe for concurrent use.
type Store struct {
	db  DB
	now func() time.Time
}

// New returns the tokens of db, stamping rows with now (time.Now if nil).
func New(db DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

// Spec says what a new token may do.
type Spec struct {
	// Name is a label for people (wsctl token ls shows it).
	Name string
	// Actors limits the token to these actors' spaces; none: every actor,
	// and the runs too.
	Actors []string
	// ReadOnly refuses every change.
	ReadOnly bool
	// TTL is how long the token is valid after its creation; 0: until
	// it is revoked.
	TTL time.Duration
}

// Token is a token's row: what it may do, until when, and whether it was
// revoked. It never holds the secret.
type Token struct {
	ID       string    `json:"id"`
	Name     string    `json:"name,omitempty"`
	Actors   []string  `json:"actors"`
	ReadOnly bool      `json:"readOnly"`
	Created  time.Time `json:"created"`
	// Expires is when the token stops being valid; nil: never.
	Expires *time.Time `json:"expires,omitempty"`
	Revoked *time.Time `json:"revoked,omitempty"`
}

// Expired reports whether the token is past its expiry at now.
func (t Token) Expired(now time.Time) bool { return t.Expires != nil && !now.Before(*t.Expires) }

// AllActors reports whether the token is not limited to some actors: it
// may touch every actor's space and the runs.
func (t Token) AllActors() bool { return len(t.Actors) == 0 }

// AllowsActor reports whether the token may touch actor's space.
func (t Token) AllowsActor(actor string) bool {
	return t.AllActors() || slices.Contains(t.Actors, actor)
}

type row struct {
	ID         string        `db:"id"`
	SecretHash []byte        `db:"secret_hash"`
	Name       string        `db:"name"`
	Actors     string        `db:"actors"`
	ReadOnly   bool          `db:"read_only"`
	Created    int64         `db:"created"`
	Expires    sql.NullInt64 `db:"expires"`
	Revoked    sql.NullInt64 `db:"revoked"`
}

func (r row) token() (Token, error) {
	t := Token{ID: r.ID, Name: r.Name, ReadOnly: r.ReadOnly, Created: time.Unix(0, r.Created).UTC()}
	if err := json.Unmarshal([]byte(r.Actors), &t.Actors); err != nil {
		return Token{}, wserr.Wrap(wserr.Corrupt, "token", r.ID, err)
	}
	if t.Actors == nil {
		t.Actors = []string{}
	}
	t.Expires, t.Revoked = timeOf(r.Expires), timeOf(r.Revoked)
	return t, nil
}

func timeOf(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	at := time.Unix(0, n.Int64).UTC()
	return &at
}

const cols = `id, secret_hash, name, actors, read_only, created, expires, revoked`

// MaxNameBytes is the longest name a token may have.
const MaxNameBytes = 256

// Create makes a token as spec says and returns its row and the token
// itself ("wst_<id>_<secret>"), which is shown this once and never stored.
// Errors: wserr.InvalidActor for an actor name that is not one;
// wserr.InvalidArgument for a negative TTL, or a name longer than
// MaxNameBytes or holding a control character or invalid UTF-8.
func (s *Store) Create(ctx context.Context, spec Spec) (Token, string, error) {
	if spec.TTL < 0 {
		return Token{}, "", wserr.New(wserr.InvalidArgument, "create token", "", "the token's lifetime %s is negative", spec.TTL)
	}
	if len(spec.Name) > MaxNameBytes {
		return Token{}, "", wserr.New(wserr.InvalidArgument, "create token", "", "the token's name is %d bytes, longer than %d", len(spec.Name), MaxNameBytes)
	}
	if !utf8.ValidString(spec.Name) || strings.IndexFunc(spec.Name, unicode.IsControl) >= 0 {
		return Token{}, "", wserr.New(wserr.InvalidArgument, "create token", "", "the token's name %q holds a control character or is not UTF-8", spec.Name)
	}
	names := []string{}
	for _, a := range spec.Actors {
		a, err := actors.ParseActor(a)
		if err != nil {
			return Token{}, "", err
		}
		if !slices.Contains(names, a) {
			names = append(names, a)
		}
	}
	var idb [6]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return Token{}, "", fmt.Errorf("create token: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Token{}, "", fmt.Errorf("create token: %w", err)
	}
	id := hex.EncodeToString(idb[:])
	enc := base64.RawURLEncoding.EncodeToString(secret[:])
	sum := sha256.Sum256([]byte(enc))
	js, _ := json.Marshal(names)
	now := s.now().UnixNano()
	var expires sql.NullInt64
	if spec.TTL > 0 {
		expires = sql.NullInt64{Int64: now + int64(spec.TTL), Valid: true}
		if expires.Int64 < now {
			expires.Int64 = math.MaxInt64 // past the clock's range: never
		}
	}
	err := s.db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (id, secret_hash, name, actors, read_only, created, expires) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id, sum[:], spec.Name, string(js), spec.ReadOnly, now, expires)
		return err
	})
	if err != nil {
		return Token{}, "", fmt.Errorf("create token: %w", index.Translate(err))
	}
	t := Token{ID: id, Name: spec.Name, Actors: names, ReadOnly: spec.ReadOnly, Created: time.Unix(0, now).UTC(), Expires: timeOf(expires)}
	return t, Prefix + id + "_" + enc, nil
}

// List returns every token, revoked ones included, oldest first.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	var rows []row
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT `+cols+` FROM tokens ORDER BY created, id`)
	})
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", index.Translate(err))
	}
	out := make([]Token, 0, len(rows))
	for _, r := range rows {
		t, err := r.token()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Revoke revokes the token id (the id, or the whole token). Revoking a
// revoked token changes nothing. Errors: wserr.InvalidArgument for an
// empty id; wserr.NotFound when no token has that id.
func (s *Store) Revoke(ctx context.Context, id string) error {
	if strings.HasPrefix(id, Prefix) {
		id, _, _ = split(id)
	}
	if id == "" {
		return wserr.New(wserr.InvalidArgument, "revoke token", "", "no token id given (wsctl token ls lists them)")
	}
	now := s.now().UnixNano()
	return s.db.Update(ctx, func(tx *index.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked = coalesce(revoked, ?) WHERE id = ?`, now, id)
		if err != nil {
			return fmt.Errorf("revoke token: %w", index.Translate(err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return wserr.New(wserr.NotFound, "revoke token", "", "no token %q (wsctl token ls lists them)", id)
		}
		return nil
	})
}

// split cuts a token into its id and secret.
func split(tok string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(tok, Prefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "_")
}

// Verify returns the row of the token tok if tok is a valid token that was
// not revoked and has not expired. Every refusal is the same wserr.Unauthorized, so a caller
// learns nothing of why; other errors are the database's.
func (s *Store) Verify(ctx context.Context, tok string) (Token, error) {
	refused := wserr.New(wserr.Unauthorized, "auth", "", "a valid bearer token is required")
	id, secret, ok := split(tok)
	if !ok || id == "" || len(id) > 64 {
		return Token{}, refused
	}
	var r row
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &r, `SELECT `+cols+` FROM tokens WHERE id = ?`, id)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Token{}, refused
	}
	if err != nil {
		return Token{}, fmt.Errorf("verify token: %w", index.Translate(err))
	}
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], r.SecretHash) != 1 || r.Revoked.Valid {
		return Token{}, refused
	}
	t, err := r.token()
	if err == nil && t.Expired(s.now()) {
		return Token{}, refused
	}
	return t, err
}
