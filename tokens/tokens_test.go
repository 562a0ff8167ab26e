package tokens_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
