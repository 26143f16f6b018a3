package mimex

import (
	"time"
)

// Defaults of the structural and text bounds (MailSynchronization settings).
const (
	DefaultMaxPartCount               = 1000   // MAILFATHOM_SYNC_MAX_MIME_PART_COUNT
	DefaultMaxNestingDepth            = 30     // MAILFATHOM_SYNC_MAX_MIME_NESTING_DEPTH
	DefaultMaxExtractedTextCharacters = 100000 // MAILFATHOM_SYNC_MAX_EXTRACTED_TEXT_CHARACTERS
)

// Limits bounds what one message may cost. A field <= 0 takes its default.
type Limits struct {
	// MaxPartCount bounds the number of MIME entities, the message itself
	// included. Parts are counted as they are opened; the message is
	// abandoned the moment the count exceeds the bound.
	MaxPartCount int
	// MaxNestingDepth bounds how many multipart containers may enclose a
	// part (the message itself is at depth 0, the children of a top-level
	// multipart at depth 1). Checked as each part is opened.
	MaxNestingDepth int
	// MaxExtractedTextCharacters bounds the body text, counted in Unicode
	// scalar values (what PostgreSQL counts as characters), applied while the
	// text is accumulated and cut on a text-element boundary.
	MaxExtractedTextCharacters int
}

// DefaultLimits returns the configured defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxPartCount:               DefaultMaxPartCount,
		MaxNestingDepth:            DefaultMaxNestingDepth,
		MaxExtractedTextCharacters: DefaultMaxExtractedTextCharacters,
	}
}

func (l Limits) withDefaults() Limits {
	if l.MaxPartCount <= 0 {
		l.MaxPartCount = DefaultMaxPartCount
	}
	if l.MaxNestingDepth <= 0 {
		l.MaxNestingDepth = DefaultMaxNestingDepth
	}
	if l.MaxExtractedTextCharacters <= 0 {
		l.MaxExtractedTextCharacters = DefaultMaxExtractedTextCharacters
	}
	return l
}

// Failure names why a message could not be read. The names are stable: they
// are stored and counted.
type Failure string

const (
	// FailureNone: the message was read.
	FailureNone Failure = ""
	// Unparseable: the bytes are not a MIME message this reader can parse
	// (a malformed header block, a multipart without a boundary, a part
	// header that does not parse).
	Unparseable Failure = "Unparseable"
	// PartCountExceeded: more parts than Limits.MaxPartCount.
	PartCountExceeded Failure = "PartCountExceeded"
	// NestingDepthExceeded: multiparts nested deeper than
	// Limits.MaxNestingDepth.
	NestingDepthExceeded Failure = "NestingDepthExceeded"
	// ReferenceScanFailed: an HTML body part defeated the bounded scan for
	// cid: references while the classification of a part depended on it.
	ReferenceScanFailed Failure = "ReferenceScanFailed"
)

// Role is the header an address was written in.
type Role string

const (
	RoleSender  Role = "Sender"
	RoleFrom    Role = "From"
	RoleReplyTo Role = "ReplyTo"
	RoleTo      Role = "To"
	RoleCc      Role = "Cc"
	RoleBcc     Role = "Bcc"
)

// Participant is one address in one role.
type Participant struct {
	Role Role
	// Address is the addr-spec as the message wrote it (a quoted local part
	// keeps its quotes and what is inside them), with comments and folding
	// white space around its tokens removed.
	Address string
	// Comparison is the upper-cased Address: the whole of the participant's
	// identity. Two addresses that differ only in case, or only in display
	// name, are one participant.
	Comparison string
	// Domain is what follows the last '@' of Address (a quoted local part
	// may contain one).
	Domain string
	// DisplayName is the decoded display name, control characters removed.
	DisplayName string
}

// Attachment describes one part classified as an attachment.
type Attachment struct {
	// FileName is the sanitized name (see SanitizeFileName); empty when
	// Unnamed.
	FileName string
	// FileNameRepaired reports that sanitizing changed the name.
	FileNameRepaired bool
	// Unnamed reports that the part carried no usable name.
	Unnamed bool
	// MediaType is the lower-cased type/subtype.
	MediaType string
	// Disposition is the lower-cased Content-Disposition value, "" when
	// absent.
	Disposition string
	// DecodedSize is the part's decoded octet count, measured by streaming it
	// through a counter.
	DecodedSize int64
	// TNEFUnexpanded marks a TNEF (winmail.dat) part, which is not expanded.
	TNEFUnexpanded bool
	// Calendar marks a text/calendar part sent as a separate part.
	Calendar bool
	// NestedMessage marks a message/rfc822 (or message/global) part, which is
	// one attachment and is not recursed into.
	NestedMessage bool
}

// Summary is the message's attachment summary.
type Summary struct {
	// Count is the number of attachments; a message has attachments when it
	// is greater than zero.
	Count int
	// TotalDecodedSize is the sum of the attachments' decoded sizes.
	TotalDecodedSize int64
	// InlineResourceCount counts parts referenced from the HTML body by cid:.
	InlineResourceCount int
	// Encrypted marks encrypted content somewhere in the message.
	Encrypted bool
	// UnverifiedSignature marks the presence of a signature; nothing here
	// verifies it.
	UnverifiedSignature bool
	// TNEF marks a TNEF part.
	TNEF bool
	// Items are the attachments, in message order.
	Items []Attachment
}

// HasAttachments reports Count > 0; an inline-only or signature-only message
// has none.
func (s Summary) HasAttachments() bool { return s.Count > 0 }

// BodyState says what the body text extraction found.
type BodyState string

const (
	// BodyText: Text holds the body text.
	BodyText BodyState = "Text"
	// BodyEncrypted: the message's own body is inside a cryptographic
	// envelope this reader does not open.
	BodyEncrypted BodyState = "Encrypted"
	// BodyNoTextualBody: the body branch holds no text/plain or text/html
	// with words in it.
	BodyNoTextualBody BodyState = "NoTextualBody"
	// BodyNotExtracted: nothing read the body (the message was not readable).
	BodyNotExtracted BodyState = "NotExtracted"
)

// Body is the searchable text of the message body.
type Body struct {
	State BodyState
	// Lossy marks text derived from HTML because the body offered no plain
	// text.
	Lossy bool
	// Text is the indexed form: Untrimmed with quoted history and a
	// signature trimmed from its end, and nowhere else, by three
	// conventions — everything from the topmost "-----Original Message-----"
	// style separator line; a trailing run of ">" lines with an
	// "On … wrote:" attribution directly above it (anchored at both ends, at
	// most MaxAttributionCharacters); an RFC 3676 "-- " line with at most
	// MaxSignatureLines lines after it (not applied when Truncated, since the
	// end of a cut text is not the end of the message). When trimming would
	// leave nothing, Text is Untrimmed.
	Text string
	// Untrimmed is the extracted text before trimming, kept because trimming
	// is heuristic.
	Untrimmed string
	// Truncated reports that the text reached
	// Limits.MaxExtractedTextCharacters and was cut.
	Truncated bool
}

// Result is what one message yields. When Readable is false only Failure
// and Body.State (NotExtracted) are set.
type Result struct {
	Readable bool
	Failure  Failure

	Participants []Participant
	SentAt       *time.Time
	ReceivedAt   *time.Time
	Subject      string
	MessageID    string
	InReplyTo    []string
	References   []string

	Attachments Summary
	Body        Body
}

func unreadable(f Failure) Result {
	return Result{Failure: f, Body: Body{State: BodyNotExtracted}}
}

// Extract reads one raw RFC 5322 message. It never panics and never returns
// an error: a message that cannot be read is a Result with Readable false and
// a named Failure.
func Extract(raw []byte, lim Limits) (res Result) {
	defer func() {
		if recover() != nil {
			res = unreadable(Unparseable)
		}
	}()
	return extract(raw, lim)
}
