// Package extraction connects the MIME reader to the search index: it reads
// one stored payload with mimex under the configured bounds and shapes what
// it found into the record searchindex writes. The forward pass calls it on
// the payload it just fetched, the backfill on raw MIME an earlier run
// stored; neither reaches a mail server through it.
package extraction

import (
	"github.com/google/uuid"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/mimex"
)

// LimitsFrom returns the reader's bounds from the MailSynchronization
// settings.
func LimitsFrom(cfg *config.Config) mimex.Limits {
	return mimex.Limits{
		MaxPartCount:               cfg.Sync.MaxMimePartCount,
		MaxNestingDepth:            cfg.Sync.MaxMimeNestingDepth,
		MaxExtractedTextCharacters: cfg.Sync.MaxExtractedTextCharacters,
	}
}

// Record reads raw and returns the record to store for the stored email id.
func Record(id uuid.UUID, raw []byte, lim mimex.Limits) searchindex.Record {
	res := mimex.Extract(raw, lim)
	rec := searchindex.Record{StoredEmailID: id, Readable: res.Readable, Failure: string(res.Failure)}
	if !res.Readable {
		return rec
	}
	rec.SentAt, rec.ReceivedAt = res.SentAt, res.ReceivedAt
	rec.Subject, rec.MessageID = res.Subject, res.MessageID
	rec.InReplyTo, rec.References = res.InReplyTo, res.References
	for _, p := range res.Participants {
		rec.Participants = append(rec.Participants, searchindex.Participant{
			Role: string(p.Role), Address: p.Address, Comparison: p.Comparison, DisplayName: p.DisplayName,
		})
	}
	s := res.Attachments
	rec.AttachmentCount, rec.AttachmentDecodedBytes, rec.InlineResourceCount = s.Count, s.TotalDecodedSize, s.InlineResourceCount
	rec.Encrypted, rec.UnverifiedSignature, rec.TNEF = s.Encrypted, s.UnverifiedSignature, s.TNEF
	for _, a := range s.Items {
		rec.Attachments = append(rec.Attachments, searchindex.Attachment{
			MediaType: a.MediaType, Disposition: a.Disposition, FileName: a.FileName,
			FileNameRepaired: a.FileNameRepaired, TNEFUnexpanded: a.TNEFUnexpanded, DecodedBytes: a.DecodedSize,
		})
	}
	switch res.Body.State {
	case mimex.BodyText:
		rec.TextSource = searchindex.SourcePlainText
		if res.Body.Lossy {
			rec.TextSource = searchindex.SourceHTMLDerived
		}
	case mimex.BodyEncrypted:
		rec.TextSource = searchindex.SourceEncrypted
	case mimex.BodyNoTextualBody:
		rec.TextSource = searchindex.SourceNoTextualBody
	default:
		rec.TextSource = searchindex.SourceNotExtracted
	}
	rec.Lossy, rec.Truncated = res.Body.Lossy, res.Body.Truncated
	rec.Text, rec.Untrimmed = res.Body.Text, res.Body.Untrimmed
	return rec
}
