// Package sasl holds MailFathom's SASL layer: the client mechanisms the
// allow-list names that go-sasl lacks, and the narrowing that picks which
// one an IMAP connection authenticates with.
//
// # Mechanisms
//
// Mechanism is a mechanism by its registered name, and Mechanisms every
// name an account's allow-list may hold, which is every mechanism this
// package implements; configuration converts its setting to them, and
// ClearText and Token classify them for the transport security policy.
//
// Every client satisfies go-sasl's Client interface (Client here is an alias
// of it), so go-imap v2's (*imapclient.Client).Authenticate runs it. This
// package implements:
//
//   - SCRAM-SHA-1, SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677,
//     draft-melnikov-scram-sha-512), verifying the server's signature,
//     without channel binding: the -PLUS variants are never offered and the
//     GS2 header is always "n,,";
//   - CRAM-MD5 (RFC 2195);
//   - XOAUTH2 (Google's and Microsoft's bearer-token format).
//
// PLAIN (RFC 4616), LOGIN (draft-murchison-sasl-login) and OAUTHBEARER
// (RFC 7628) are go-sasl's own clients, wrapped where go-sasl's client does
// not finish the exchange the way an IMAP server expects (see NewClient).
//
// DIGEST-MD5, NTLM and every -PLUS variant are registered mechanisms this
// package does not implement (Unimplemented). They are refused, not
// skipped: configuration refuses an allow-list naming one at startup, and
// imapx refuses an endpoint permitting one before it connects, both under
// the rule AuthenticationMechanismNotSupported, listing the supported
// names. This is deliberate. Skipping an unimplemented mechanism where a
// connection authenticates would be a downgrade nobody sees: an allow-list
// of "SCRAM-SHA-256-PLUS,PLAIN" would quietly mean PLAIN, with nothing to
// tell the operator that channel binding never happens. Refusing is
// honest: the allow-list means what it says, or MailFathom does not start.
// Choose still never picks one, should a Situation name one anyway.
//
// # Narrowing
//
// Choose and Negotiator apply the transport security policy's SASL rules
// where a connection authenticates: the server's advertised mechanisms are
// filtered to the permitted ones and the strongest implemented survivor is
// chosen by a fixed order (SCRAM-SHA-512, SCRAM-SHA-256, SCRAM-SHA-1,
// CRAM-MD5, then for a token account OAUTHBEARER and XOAUTH2, then PLAIN
// and LOGIN), whatever order the allow-list was configured in; a removed
// mechanism is never restored; and the clear-text LOGIN command is a
// fallback only when the allow-list already permits a clear-text mechanism.
// Otherwise the attempt ends with ErrMechanismUnavailable, before any
// credential is sent.
//
// # Use
//
// The stream handed to imapclient.New goes through FixEmptyResponses, which
// works around go-imap sending an empty SASL response as "=" (see
// EmptyResponseConn); without it every SCRAM exchange fails against
// Dovecot. The choice is made before the password is resolved, so an
// attempt that ends with ErrMechanismUnavailable never had one:
//
//	fix := sasl.FixEmptyResponses(stream)
//	c := imapclient.New(fix, opts)
//	...
//	defer fix.Stop()
//	caps := c.Caps()
//	n := sasl.NewNegotiator(sasl.Situation{
//		Permitted:                     policy.PermittedAuthenticationMechanisms,
//		Advertised:                    caps.AuthMechanisms(),
//		LoginDisabled:                 caps.Has(imap.CapLoginDisabled),
//		CanStayUnencrypted:            policy.ConnectionSecurity.CanStayUnencrypted(),
//		AllowClearTextOverUnencrypted: policy.AllowClearTextAuthenticationOverUnencryptedConnection,
//		Encrypted:                     isTLS,
//	})
//	choice, err := n.Next() // ErrMechanismUnavailable: nothing resolved, nothing sent
//	...
//	password := resolve()
//	defer clear(password)
//	if choice.LoginCommand {
//		err = c.Login(user, string(password)).Wait()
//	} else {
//		cl, _ := sasl.NewClient(choice.Mechanism, sasl.Credentials{Username: user, Password: password})
//		err = sasl.Authenticate(c, cl)
//	}
//
// # Secrets
//
// Passwords and tokens are taken as byte slices the caller owns and clears
// after the exchange. The clients clear the buffers they derive from them
// (SCRAM's salted password and keys, CRAM-MD5's and XOAUTH2's responses)
// when the exchange ends. Copies outside this package's reach remain:
// go-imap encodes every response as a base64 string, go-sasl's PLAIN, LOGIN
// and OAUTHBEARER clients take strings, SASLprep of a password that is not
// printable ASCII works on strings, and crypto/hmac keeps its own copy of
// a key it was given. No error of this package carries a password, a token, a
// user name or text the server chose.
package sasl
