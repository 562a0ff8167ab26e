// Package tokens implements the bearer tokens that guard the HTTP API
// (wsctl serve): creating, listing, revoking and verifying them.
//
// tokens owns the tokens table. A token reads "wst_<id>_<secret>": the id
// names its row, the secret is 32 random bytes that only the caller ever
// holds. The row keeps the secret's SHA-256, never the secret, so a copy
// of the store grants nothing.
//
// Guarantees:
//   - Verify compares the secret's hash with the stored one in constant
//     time (crypto/subtle), whatever the token looks like.
//   - A revoked token never verifies again; revocation takes effect on the
//     next request, as every request reads the row. A token created with a
//     lifetime (Spec.TTL) stops verifying once it has passed, by the
//     store's clock, and stays listed.
//   - A token carries its limits (actors, read-only) in its row; Token's
//     methods are the one place they are read.
//
// tokens knows nothing of HTTP, runs or actor spaces.
package tokens
