// Package mimex turns raw MIME into the values MailFathom stores: bytes in,
// extracted values out. It touches no database and no network.
package mimex
