package tokens_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/wserr"
)

func TestCreateVerifyRevoke(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	tk, secret, err := st.Tokens.Create(ctx, tokens.Spec{Name: "n", Actors: []string{"bob", "alice", "bob"}, ReadOnly: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"bob", "alice"}, tk.Actors)
	assert.True(t, strings.HasPrefix(secret, tokens.Prefix+tk.ID+"_"))

	got, err := st.Tokens.Verify(ctx, secret)
	require.NoError(t, err)
	assert.Equal(t, tk.ID, got.ID)
	assert.True(t, got.ReadOnly)
	assert.True(t, got.AllowsActor("alice"))
	assert.False(t, got.AllowsActor("carol"))

	var n int
	require.NoError(t, st.DB.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &n, `SELECT count(*) FROM tokens WHERE instr(CAST(secret_hash AS TEXT), ?) > 0 OR instr(name, ?) > 0`, secret, secret)
	}))
	assert.Zero(t, n, "the secret is not stored")

	for name, bad := range map[string]string{
		"Empty": "", "NoPrefix": "abc", "UnknownID": tokens.Prefix + "ffffffffffff_x",
		"WrongSecret": tokens.Prefix + tk.ID + "_x", "NoSecret": tokens.Prefix + tk.ID,
	} {
		t.Run("Unauthorized/"+name, func(t *testing.T) {
			_, err := st.Tokens.Verify(ctx, bad)
			assert.True(t, wserr.Is(err, wserr.Unauthorized), "%v", err)
		})
	}
	require.NoError(t, st.Tokens.Revoke(ctx, tk.ID))
	require.NoError(t, st.Tokens.Revoke(ctx, secret), "revoking again, by the token itself, changes nothing")
	_, err = st.Tokens.Verify(ctx, secret)
	assert.True(t, wserr.Is(err, wserr.Unauthorized))
	ls, err := st.Tokens.List(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	assert.NotNil(t, ls[0].Revoked)
	assert.True(t, wserr.Is(st.Tokens.Revoke(ctx, "nope"), wserr.NotFound))

	_, _, err = st.Tokens.Create(ctx, tokens.Spec{Actors: []string{"a/b"}})
	assert.True(t, wserr.Is(err, wserr.InvalidActor))
}

// TestTokenExpires: a token created with a lifetime verifies until it has
// passed and is refused from then on, by the store's clock, as a revoked
// one is; ls lists it with its expiry. A token without one never expires;
// a negative lifetime is refused and nothing is created.
func TestTokenExpires(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClockAt(storetest.Epoch, 0) // moves when told
	st := storetest.OpenStoreWith(t, wsstore.Options{Now: clock.Now})
	tk, secret, err := st.Tokens.Create(ctx, tokens.Spec{Name: "day", TTL: 24 * time.Hour})
	require.NoError(t, err)
	require.NotNil(t, tk.Expires)
	assert.Equal(t, storetest.Epoch.Add(24*time.Hour), *tk.Expires)
	forever, foreverSecret, err := st.Tokens.Create(ctx, tokens.Spec{Name: "forever"})
	require.NoError(t, err)
	assert.Nil(t, forever.Expires)

	clock.Advance(24*time.Hour - time.Nanosecond)
	_, err = st.Tokens.Verify(ctx, secret)
	require.NoError(t, err, "valid until its last nanosecond")
	clock.Advance(time.Nanosecond)
	_, err = st.Tokens.Verify(ctx, secret)
	assert.True(t, wserr.Is(err, wserr.Unauthorized), "expired: %v", err)
	clock.Advance(10 * 365 * 24 * time.Hour)
	_, err = st.Tokens.Verify(ctx, foreverSecret)
	assert.NoError(t, err, "a token without a lifetime")

	ls, err := st.Tokens.List(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	byName := map[string]tokens.Token{ls[0].Name: ls[0], ls[1].Name: ls[1]}
	assert.Equal(t, tk.Expires, byName["day"].Expires)
	assert.True(t, byName["day"].Expired(clock.Now()))
	assert.Nil(t, byName["forever"].Expires)
	assert.False(t, byName["forever"].Expired(clock.Now()))

	_, _, err = st.Tokens.Create(ctx, tokens.Spec{TTL: -time.Second})
	assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	ls, err = st.Tokens.List(ctx)
	require.NoError(t, err)
	assert.Len(t, ls, 2, "nothing created")
}

// TestTokenRefusesBadNamesAndIDs: a token's name longer than MaxNameBytes,
// or holding a control character (a line break splits `wsctl token ls`'s
// line) or invalid UTF-8, is refused as workspace.invalid_argument and no
// token is made; revoking the empty id is the same code, not "no token".
func TestTokenRefusesBadNamesAndIDs(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	for name, bad := range map[string]string{
		"TooLong": strings.Repeat("n", tokens.MaxNameBytes+1), "Newline": "ci\nadmin", "Tab": "a\tb",
		"Escape": "a\x1b[2Jb", "NotUTF8": "a\xffb", "Delete": "a\x7fb",
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := st.Tokens.Create(ctx, tokens.Spec{Name: bad})
			assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
		})
	}
	ls, err := st.Tokens.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, ls, "nothing was created")
	_, _, err = st.Tokens.Create(ctx, tokens.Spec{Name: strings.Repeat("é", tokens.MaxNameBytes/2)})
	require.NoError(t, err, "a name of MaxNameBytes is taken")
	for _, id := range []string{"", tokens.Prefix} {
		err = st.Tokens.Revoke(ctx, id)
		assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%q: %v", id, err)
	}
}
