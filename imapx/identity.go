package imapx

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// IdentityScheme is how a server names a message across its folders.
type IdentityScheme string

// The identity schemes, by the capability that offers them.
const (
	// NoIdentity: the server says nothing about which occurrences are one
	// message; each occurrence is a message of its own.
	NoIdentity IdentityScheme = ""
	// GmailIdentity: X-GM-EXT-1, Gmail's X-GM-MSGID, X-GM-THRID and
	// X-GM-LABELS. One message carries one X-GM-MSGID in every folder
	// (label) it is shown in.
	GmailIdentity IdentityScheme = "x-gm-msgid"
	// ObjectIdentity: OBJECTID (RFC 8474), EMAILID and THREADID. A message
	// copied to another folder keeps its EMAILID (§5.1).
	ObjectIdentity IdentityScheme = "emailid"
)

// CapGmail is Gmail's extension capability.
const CapGmail imap.Cap = "X-GM-EXT-1"

// CapObjectID is RFC 8474's capability.
const CapObjectID imap.Cap = "OBJECTID"

// identitySchemeFor prefers Gmail's identity, which also carries labels,
// over OBJECTID.
func identitySchemeFor(caps imap.CapSet) IdentityScheme {
	switch {
	case caps.Has(CapGmail):
		return GmailIdentity
	case caps.Has(CapObjectID):
		return ObjectIdentity
	}
	return NoIdentity
}

// IdentityScheme is the scheme the server advertised after authentication.
func (s *ReadSession) IdentityScheme() IdentityScheme {
	return identitySchemeFor(s.caps)
}

// MessageIdentity is the server's statement of what a message is.
type MessageIdentity struct {
	// EmailID is X-GM-MSGID (decimal) or EMAILID, never "" in an answer.
	EmailID string
	// ThreadID is X-GM-THRID or THREADID, "" when the server sent none.
	ThreadID string
	// Labels are the message's X-GM-LABELS as Gmail sent them (`\Inbox`,
	// `\Important`, user labels); nil under ObjectIdentity.
	Labels []string
}

// identityItems are the FETCH items of scheme.
func identityItems(scheme IdentityScheme) []wire.FetchItem {
	switch scheme {
	case GmailIdentity:
		return []wire.FetchItem{wire.FetchGmailMsgID, wire.FetchGmailThrID, wire.FetchGmailLabels}
	case ObjectIdentity:
		return []wire.FetchItem{wire.FetchEmailID, wire.FetchThreadID}
	}
	return nil
}

// FetchIdentities asks the server for the identity of uids in the open
// folder: UID FETCH <set> (UID X-GM-MSGID X-GM-THRID X-GM-LABELS) on Gmail,
// (UID EMAILID THREADID) under OBJECTID. Both are answered from folder
// state, like FLAGS, so nothing about the message changes. It returns an
// entry per UID the server identified; a UID expunged meanwhile, or one
// the server answered without an identity, is absent. With NoIdentity it
// returns nil without asking anything.
//
// The question goes over the session's own connection, lent by go-imap
// (which cannot parse these items) to the wire layer between two of its
// commands (lend.go): it costs the server no other login. The errors are
// those of FetchMetadata.
func (s *ReadSession) FetchIdentities(ctx context.Context, uids []uint32) (map[uint32]MessageIdentity, error) {
	scheme := s.IdentityScheme()
	if scheme == NoIdentity {
		return nil, nil
	}
	if err := s.openFolder(); err != nil {
		return nil, err
	}
	window, err := normalizeWindow(uids)
	if err != nil || len(window) == 0 {
		return nil, err
	}
	start := time.Now()
	items := append([]wire.FetchItem{wire.FetchUID}, identityItems(scheme)...)
	answered := map[uint32]*wire.FetchAttrs{}
	err = s.onOwnConnection(ctx, "UID FETCH", func(w *wire.Conn, expunged func()) error {
		for _, ch := range wire.ChunkUIDs(window, wire.MaxSetBytes) {
			err := fromWire(w.UIDFetchFlags(ctx, s.opts.commandTimeout(), wire.FlagsFetch{Set: ch.Set, Items: items},
				func(r *wire.Response) {
					switch {
					case r.Kind == wire.RespFetch && r.Fetch.HasUID:
						mergeFetch(answered, r.Fetch)
					case r.Kind == wire.RespExpunge:
						expunged()
					}
				}))
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]MessageIdentity, len(answered))
	for uid, a := range answered {
		if a.Identity.EmailID == "" {
			continue
		}
		id := MessageIdentity{EmailID: a.Identity.EmailID, ThreadID: a.Identity.ThreadID}
		if scheme == GmailIdentity && a.HasLabels {
			id.Labels = a.Labels
		}
		out[uid] = id
	}
	s.debug(ctx, "imap fetch identities", slog.String("scheme", string(scheme)), slog.Int("requested", len(window)),
		slog.Int("identified", len(out)), slog.Duration("elapsed", time.Since(start)))
	return out, nil
}

// onOwnConnection runs f with the wire layer on the session's own
// connection, the open folder already examined on it: go-imap's, lent
// between two of its commands, or a reconciliation session's only one.
// expunged counts an EXPUNGE f reads, as go-imap would have.
func (s *ReadSession) onOwnConnection(ctx context.Context, name string, f func(w *wire.Conn, expunged func()) error) error {
	if s.reconcileOnly {
		w, err := s.reconcileConn(ctx)
		if err != nil {
			return err
		}
		return f(w, func() {})
	}
	cn := s.cn
	switch {
	case cn == nil:
		return &TransportError{Op: name, Err: wire.ErrNotConnected}
	case cn.sock.Broken():
		return &TransportError{Op: name, Err: wire.ErrConnectionUnusable}
	case ctx.Err() != nil:
		return fmt.Errorf("imapx: %s: %w", name, ctx.Err())
	}
	stream, err := cn.gate.lend(ctx, s.opts.commandTimeout())
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("imapx: %s: %w", name, ctx.Err())
		}
		cn.kill()
		return &TransportError{Op: name, Err: err}
	}
	w := wire.New(cn.sock, stream, s.caps, maxUntaggedPerCommand)
	w.InFolder(s.folder)
	err = f(w, func() { cn.expunges.Add(1) })
	cn.gate.giveBack(w.Handback())
	return err
}
