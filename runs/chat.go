package runs

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// ChatKey is a chat's stable identity as the host knows it: the kind of
// chat ("character", "group", …) and its stableChatId. It never contains a
// file name or display name, so renames do not split a workspace.
type ChatKey struct {
	Kind         string `json:"kind"`
	StableChatID string `json:"stableChatId"`
}

// Limits of what a host gives a run to name its chat: every row of the
// chat and of its runs holds them, and an archive row holds at most 64 MiB.
const (
	// MaxChatKeyBytes bounds a chat's kind and its stableChatId, each.
	MaxChatKeyBytes = 1024
	// MaxChatRefBytes bounds a run's chatRef, as JSON.
	MaxChatRefBytes = 1 << 20
)

func (k ChatKey) validate() error {
	if strings.TrimSpace(k.Kind) == "" || strings.TrimSpace(k.StableChatID) == "" {
		return wserr.New(wserr.InvalidArgument, "chat", "", "chat kind and stableChatId are required")
	}
	if len(k.Kind) > MaxChatKeyBytes || len(k.StableChatID) > MaxChatKeyBytes {
		return wserr.New(wserr.InvalidArgument, "chat", "", "chat kind (%d bytes) and stableChatId (%d bytes) are each at most %d bytes", len(k.Kind), len(k.StableChatID), MaxChatKeyBytes)
	}
	if !utf8.ValidString(k.Kind) || !utf8.ValidString(k.StableChatID) {
		// Two different invalid ids would derive the same workspace id.
		return wserr.New(wserr.InvalidArgument, "chat", "", "chat kind and stableChatId must be valid UTF-8")
	}
	return nil
}

// ChatWorkspaceID derives a chat workspace id from the chat's stable
// identity: "chat_" + the first 16 hex digits of the SHA-256 of the
// canonical JSON {"kind":…,"stableChatId":…}: keys sorted, no spaces, and
// strings escaped as RFC 8785 (JSON.stringify, serde_json) escape them, so
// a host in any language derives the same id.
func ChatWorkspaceID(k ChatKey) string {
	var b strings.Builder
	b.WriteString(`{"kind":`)
	canonicalString(&b, k.Kind)
	b.WriteString(`,"stableChatId":`)
	canonicalString(&b, k.StableChatID)
	b.WriteString(`}`)
	sum := sha256.Sum256([]byte(b.String()))
	return "chat_" + hex.EncodeToString(sum[:])[:16]
}

// canonicalString writes s as a JSON string with only the escapes RFC 8785
// requires: quote, backslash and control characters. Invalid UTF-8 is
// written as U+FFFD, as JSON encoders do.
func canonicalString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// Chat is a chat workspace: the level shared by every run of one chat.
type Chat struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	StableChatID   string          `json:"stableChatId"`
	ChatRef        json.RawMessage `json:"chatRef"`
	PersistRoot    cas.Hash        `json:"persistRoot"`
	PersistVersion int64           `json:"persistVersion"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
}

type chatRow struct {
	ID             string   `db:"id"`
	Kind           string   `db:"kind"`
	StableChatID   string   `db:"stable_chat_id"`
	ChatRef        string   `db:"chat_ref"`
	PersistRoot    cas.Hash `db:"persist_root"`
	PersistVersion int64    `db:"persist_version"`
	CreatedAt      int64    `db:"created_at"`
	UpdatedAt      int64    `db:"updated_at"`
}

func (r chatRow) chat() Chat {
	return Chat{ID: r.ID, Kind: r.Kind, StableChatID: r.StableChatID, ChatRef: json.RawMessage(r.ChatRef),
		PersistRoot: r.PersistRoot, PersistVersion: r.PersistVersion,
		CreatedAt: time.Unix(0, r.CreatedAt).UTC(), UpdatedAt: time.Unix(0, r.UpdatedAt).UTC()}
}

const chatCols = `id, kind, stable_chat_id, chat_ref, persist_root, persist_version, created_at, updated_at`

func findChat(ctx context.Context, tx *index.Tx, id string) (Chat, error) {
	var r chatRow
	err := tx.GetContext(ctx, &r, `SELECT `+chatCols+` FROM chats WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Chat{}, wserr.New(wserr.NotFound, "chat", "", "no chat workspace %s", id)
	}
	if err != nil {
		return Chat{}, index.Translate(err)
	}
	return r.chat(), nil
}

// ensureChat returns the chat workspace of k, creating it with an empty
// persist layer if needed, and records ref, if given, as the latest chat
// reference: a run created without one leaves the chat's as it is.
func (s *Service) ensureChat(ctx context.Context, tx *index.Tx, k ChatKey, ref json.RawMessage) (Chat, error) {
	if _, err := s.trees.Put(ctx, tx, nil); err != nil {
		return Chat{}, err
	}
	id := ChatWorkspaceID(k)
	now := s.now().UnixNano()
	given := len(ref) > 0
	if !given {
		ref = json.RawMessage(`{}`)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO chats (`+chatCols+`) VALUES (?, ?, ?, ?, ?, 0, ?, ?)
		ON CONFLICT (id) DO UPDATE SET chat_ref = CASE WHEN ? THEN excluded.chat_ref ELSE chat_ref END,
			updated_at = excluded.updated_at`,
		id, k.Kind, k.StableChatID, string(ref), vfs.EmptyTree, now, now, given)
	if err != nil {
		return Chat{}, index.Translate(err)
	}
	return findChat(ctx, tx, id)
}

// Chat returns the chat workspace with the given id. It fails with
// store.not_found if there is none.
func (s *Service) Chat(ctx context.Context, id string) (Chat, error) {
	var c Chat
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		c, err = findChat(ctx, tx, id)
		return err
	})
	return c, err
}

// Chats lists every chat workspace, newest first.
func (s *Service) Chats(ctx context.Context) ([]Chat, error) {
	var rows []chatRow
	err := s.db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &rows, `SELECT `+chatCols+` FROM chats ORDER BY created_at DESC, id`)
	})
	if err != nil {
		return nil, err
	}
	out := make([]Chat, len(rows))
	for i, r := range rows {
		out[i] = r.chat()
	}
	return out, nil
}
