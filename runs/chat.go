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

// ChatQuery asks ChatsPage for a page of chat workspaces.
type ChatQuery struct {
	// StableChatID, if given, lists only the chats of this stableChatId,
	// of every kind.
	StableChatID string
	// Limit is the most chats a page holds: 1..MaxChatPage, 0 for
	// DefaultChatPage.
	Limit int
	// After is the id of the last chat of the page before: the page goes
	// on from the chat after it, in the list's order. Empty: from the
	// newest.
	After string
}

// The chats a page holds.
const (
	DefaultChatPage = 1000
	MaxChatPage     = 10000
	// MaxChatPageRefBytes bounds the chat references a page holds: a page
	// ends before the chat that would take its chatRefs past it (a page
	// holds one chat at least, whose chatRef is at most MaxChatRefBytes).
	MaxChatPageRefBytes = 4 << 20
)

// ChatsPage lists chat workspaces newest first (then by id: a chat's
// place never changes), a page at a time: up to q.Limit chats, fewer if
// their chat references would pass MaxChatPageRefBytes. more says whether
// chats follow the page. A page reads the chats it returns, from where the
// one before ended, not every chat. A Limit outside 0..MaxChatPage is
// workspace.invalid_argument; an After that names no chat (deleted since
// the page before, say) is store.not_found.
func (s *Service) ChatsPage(ctx context.Context, q ChatQuery) (page []Chat, more bool, err error) {
	if q.Limit == 0 {
		q.Limit = DefaultChatPage
	}
	if q.Limit < 1 || q.Limit > MaxChatPage {
		return nil, false, wserr.New(wserr.InvalidArgument, "list chats", "", "limit %d must be in 0..%d (0: %d)", q.Limit, MaxChatPage, DefaultChatPage)
	}
	// The newest come from the chats_newest index (created_at DESC, id),
	// a stableChatId's from chats_stable, without sorting every chat.
	var where []string
	var args []any
	if q.StableChatID != "" {
		where, args = append(where, "stable_chat_id = ?"), append(args, q.StableChatID)
	}
	err = s.db.View(ctx, func(tx *index.Tx) error {
		page, more = nil, false
		if q.After != "" {
			cond, at, found, err := pastRow(ctx, tx, "chats", "", q.After)
			if err != nil {
				return index.Translate(err)
			}
			if !found {
				// No op of its own: "list chats" is added below.
				return wserr.New(wserr.NotFound, "", "", "no chat workspace %q to list after: it may have been deleted since; list again from the newest", q.After)
			}
			where, args = append(where, cond), append(args, at...)
		}
		cond := ""
		if len(where) > 0 {
			cond = "WHERE " + strings.Join(where, " AND ")
		}
		// One chat past the page says whether more follow; the rows are
		// read one at a time, so a page cut by its references' bytes
		// holds no more than that.
		rows, err := tx.QueryxContext(ctx, `SELECT `+chatCols+` FROM chats `+cond+`
			ORDER BY created_at DESC, id LIMIT ?`, append(args, q.Limit+1)...)
		if err != nil {
			return index.Translate(err)
		}
		more, err = readPage(rows, q.Limit, MaxChatPageRefBytes, func(r *chatRow) int { return len(r.ChatRef) }, func(r *chatRow) error {
			page = append(page, r.chat())
			return nil
		})
		return index.Translate(err)
	})
	if err != nil {
		return nil, false, fmt.Errorf("list chats: %w", err)
	}
	if page == nil {
		page = []Chat{}
	}
	return page, more, nil
}
