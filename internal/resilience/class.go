package resilience

import "fmt"

// DependencyClass is one kind of outbound dependency. Its values are the
// declared constants below; any other value is undeclared and resolves no
// pipeline.
type DependencyClass string

// The declared dependency classes. A class exists when its failure modes
// and its rules for safe repetition differ from every other class.
const (
	// MailboxSessionEstablishment covers connecting to an IMAP server,
	// negotiating TLS, authenticating and selecting a folder read-only. It
	// is separate from retrieval because a rejected credential must never
	// be repeated: against a mail server that is how an account gets
	// locked. Keyed by account.
	MailboxSessionEstablishment DependencyClass = "MailboxSessionEstablishment"
	// MailboxDataRetrieval covers listing, searching, fetching and
	// streaming mailbox data over an established session; the reads are
	// repeatable by construction. Keyed by account.
	MailboxDataRetrieval DependencyClass = "MailboxDataRetrieval"
	// DatabaseCommandExecution covers commands against the local PostgreSQL
	// database that own no transaction. Keyed by SharedInstance.
	DatabaseCommandExecution DependencyClass = "DatabaseCommandExecution"
	// AiProviderInvocation covers chat and embedding provider calls. Keyed
	// by endpoint alias.
	AiProviderInvocation DependencyClass = "AiProviderInvocation"
	// MailAuthorizationServerInvocation covers exchanging a configured
	// OAuth grant for a mailbox access token. A token request carries no
	// mailbox password, so it cannot lock an account, and an authorization
	// server answering an overload with a 503 invites the request again.
	// Keeping it apart from establishment is also what keeps the token
	// request an establishment makes from nesting one retry budget inside
	// another. Keyed by account.
	MailAuthorizationServerInvocation DependencyClass = "MailAuthorizationServerInvocation"
)

// classes lists the declared classes in declaration order; a class's index
// is its bit in the in-flight mark.
var classes = [...]DependencyClass{
	MailboxSessionEstablishment,
	MailboxDataRetrieval,
	DatabaseCommandExecution,
	AiProviderInvocation,
	MailAuthorizationServerInvocation,
}

// Classes returns every declared class in declaration order.
func Classes() []DependencyClass {
	out := make([]DependencyClass, len(classes))
	copy(out, classes[:])
	return out
}

// Declared reports whether c is one of the declared classes.
func (c DependencyClass) Declared() bool { return c.index() >= 0 }

func (c DependencyClass) index() int {
	for i, d := range classes {
		if d == c {
			return i
		}
	}
	return -1
}

// String returns the class name.
func (c DependencyClass) String() string { return string(c) }

// Family is the protocol family whose classification rules apply to a
// class.
type Family string

// The protocol families.
const (
	FamilyMailbox  Family = "Mailbox"
	FamilyDatabase Family = "Database"
	FamilyProvider Family = "Provider"
)

// Family returns the protocol family of c, or "" for an undeclared class.
// Both mailbox classes are Mailbox; the authorization server is a Provider
// because what an HTTP status says about the remote party does not depend
// on what was asked of it.
func (c DependencyClass) Family() Family {
	switch c {
	case MailboxSessionEstablishment, MailboxDataRetrieval:
		return FamilyMailbox
	case DatabaseCommandExecution:
		return FamilyDatabase
	case AiProviderInvocation, MailAuthorizationServerInvocation:
		return FamilyProvider
	}
	return ""
}

// SharedInstance is the instance of a class that talks to one remote
// instance only, such as the local database: one process-wide pipeline.
const SharedInstance = "shared"

// OperationFolderDiscovery is the operation name of work on a connection
// that pins no folder (listing folders, establishing for discovery).
const OperationFolderDiscovery = "folder-discovery"

// OperationMailboxMutation is the operation name of the write connection's
// work: opening it and the commands of a mailbox mutation.
const OperationMailboxMutation = "mailbox-mutation"

// Key identifies one pipeline: a dependency class and the remote instance
// it talks to. Instance is deployment vocabulary — the configured account
// id, the endpoint alias, or SharedInstance — and never anything taken from
// mail, because it labels metrics and log lines.
type Key struct {
	Class    DependencyClass
	Instance string
}

// String renders the key as "Class/Instance".
func (k Key) String() string { return fmt.Sprintf("%s/%s", k.Class, k.Instance) }
