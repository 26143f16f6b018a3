package mailoauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxResponseBytes bounds the token endpoint answer read. A JSON Web Token
// access token with an id_token beside it is a few kilobytes; an answer
// past this bound is refused as malformed rather than read whole.
const MaxResponseBytes = 256 << 10

// NewHTTPClient returns the client token requests go through by default:
// a clone of the default transport (proxy settings from the environment,
// the system's roots), no redirects followed — a token endpoint has no
// reason to redirect, and following one would send the client's
// credentials to an address nobody configured — and no Timeout, because
// the pipeline's attempt timeout bounds each request through its context.
// It retries nothing: net/http replays only idempotent requests, never a
// POST.
func NewHTTPClient() *http.Client {
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		transport = t.Clone()
	}
	return &http.Client{
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// grant is one refresh_token grant request (RFC 6749 §6). The byte slices
// belong to the caller, which wipes them.
type grant struct {
	endpoint     string
	clientID     []byte
	clientSecret []byte
	refreshToken []byte
	scope        string
}

// issued is a successful token response (RFC 6749 §5.1). Its slices belong
// to whoever receives it, which wipes them.
type issued struct {
	accessToken []byte
	// refreshToken is a new refresh token, or nil when the server sent
	// none (the old one stays valid).
	refreshToken []byte
	// expiresIn is the token's lifetime, or zero when the server did not
	// say.
	expiresIn time.Duration
}

func (t *issued) wipe() {
	clear(t.accessToken)
	clear(t.refreshToken)
}

// exchange sends g to its token endpoint over client and reads the answer.
// It makes exactly one HTTP request.
func exchange(ctx context.Context, client *http.Client, g grant) (*issued, error) {
	body := formBody(g)
	defer clear(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint, bytes.NewReader(body))
	if err != nil {
		// url.Parse's errors quote the URL; configuration validated it, so
		// this is not expected, and nothing of it is repeated.
		return nil, errors.New("mailoauth: the token endpoint URL does not parse")
	}
	// No GetBody: nothing may send this body a second time.
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	auth := basicCredentials(g.clientID, g.clientSecret)
	req.Header.Set("Authorization", "Basic "+string(auth))
	clear(auth)

	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &TransportError{Err: err}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	_ = resp.Body.Close()
	defer clear(raw)
	if err != nil {
		return nil, &TransportError{Err: err}
	}
	if len(raw) > MaxResponseBytes {
		return nil, fmt.Errorf("%w: the answer is larger than %d bytes", ErrMalformedResponse, MaxResponseBytes)
	}
	return readAnswer(resp.StatusCode, raw)
}

// formBody encodes the grant's parameters (RFC 6749 §6, Appendix B) into a
// slice this package owns.
func formBody(g grant) []byte {
	var b []byte
	b = append(b, "grant_type=refresh_token&refresh_token="...)
	b = appendFormEscaped(b, g.refreshToken)
	if g.scope != "" {
		b = append(b, "&scope="...)
		b = appendFormEscaped(b, []byte(g.scope))
	}
	return b
}

// basicCredentials returns base64(form(id) ":" form(secret)), the HTTP
// Basic credentials RFC 6749 §2.3.1 prescribes (each part form-encoded
// first), in a slice the caller wipes.
func basicCredentials(id, secret []byte) []byte {
	plain := appendFormEscaped(nil, id)
	plain = append(plain, ':')
	plain = appendFormEscaped(plain, secret)
	out := make([]byte, base64.StdEncoding.EncodedLen(len(plain)))
	base64.StdEncoding.Encode(out, plain)
	clear(plain)
	return out
}

// appendFormEscaped appends s encoded as application/x-www-form-urlencoded
// (what url.QueryEscape does, without making a string of it).
func appendFormEscaped(b, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b = append(b, c)
		case c == ' ':
			b = append(b, '+')
		default:
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}

// answer is the JSON of a token response or error response. The tokens
// stay raw so they are never made into strings.
type answer struct {
	AccessToken  json.RawMessage `json:"access_token"`
	TokenType    string          `json:"token_type"`
	ExpiresIn    json.RawMessage `json:"expires_in"`
	RefreshToken json.RawMessage `json:"refresh_token"`
	Error        json.RawMessage `json:"error"`
}

// readAnswer reads a token endpoint answer (RFC 6749 §5.1, §5.2).
func readAnswer(status int, raw []byte) (*issued, error) {
	var a answer
	parseErr := json.Unmarshal(raw, &a)
	// The raw messages are copies of the tokens.
	defer clear(a.AccessToken)
	defer clear(a.RefreshToken)
	code := errorCode(a.Error)
	if status != http.StatusOK {
		return nil, &TokenEndpointError{Status: status, Code: code}
	}
	if parseErr != nil {
		return nil, fmt.Errorf("%w: the answer is not a JSON object", ErrMalformedResponse)
	}
	if len(a.Error) > 0 && string(a.Error) != "null" {
		// Some servers answer an error with 200 (RFC 6749 §5.2 asks for
		// 400); it is still an error.
		return nil, &TokenEndpointError{Status: status, Code: code}
	}
	if a.TokenType != "" && !strings.EqualFold(a.TokenType, "bearer") {
		return nil, fmt.Errorf("%w: the token type is not Bearer", ErrMalformedResponse)
	}
	t := &issued{}
	var err error
	if t.accessToken, err = b64token(a.AccessToken); err != nil || t.accessToken == nil {
		t.wipe()
		return nil, fmt.Errorf("%w: the access token is missing or not an RFC 6750 b64token", ErrMalformedResponse)
	}
	if len(a.RefreshToken) > 0 && string(a.RefreshToken) != "null" {
		if t.refreshToken, err = jsonBytes(a.RefreshToken); err != nil || len(t.refreshToken) == 0 {
			t.wipe()
			return nil, fmt.Errorf("%w: the refresh token is not a JSON string", ErrMalformedResponse)
		}
	}
	if t.expiresIn, err = lifetime(a.ExpiresIn); err != nil {
		t.wipe()
		return nil, fmt.Errorf("%w: expires_in is not a number of seconds", ErrMalformedResponse)
	}
	return t, nil
}

// maxErrorCode bounds an error code kept from an answer.
const maxErrorCode = 64

// errorCode returns the error code of an error response when it is a JSON
// string of the characters RFC 6749 §5.2 allows (%x20-21 / %x23-5B /
// %x5D-7E, no space here) and at most maxErrorCode bytes, and "" otherwise.
func errorCode(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || len(s) == 0 || len(s) > maxErrorCode {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return ""
		}
	}
	return s
}

// lifetime reads expires_in: a number of seconds, which some servers send
// as a string. Absent is zero.
func lifetime(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	text := string(raw)
	if unquoted, err := strconv.Unquote(text); err == nil {
		text = unquoted
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 || n > int64(100*365*24*time.Hour/time.Second) {
		return 0, errors.New("not a number of seconds")
	}
	return time.Duration(n) * time.Second, nil
}

// b64token returns the access token of raw, a JSON string, checked
// against the RFC 6750 §2.1 b64token syntax that both XOAUTH2 and
// OAUTHBEARER (RFC 7628 §3.1) carry: 1*( ALPHA / DIGIT / "-" / "." / "_" /
// "~" / "+" / "/" ) *"=". Absent is nil.
func b64token(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	tok, err := jsonBytes(raw)
	if err != nil {
		return nil, err
	}
	end := len(tok)
	for end > 0 && tok[end-1] == '=' {
		end--
	}
	if end == 0 {
		clear(tok)
		return nil, errors.New("empty token")
	}
	for _, c := range tok[:end] {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			clear(tok)
			return nil, errors.New("not a b64token")
		}
	}
	return tok, nil
}

// jsonBytes decodes raw, a JSON string of printable ASCII, into a new
// slice without making a string of it. The escapes a token can need are
// decoded ("\/", "\\", "\"" and \u00XX for printable ASCII); anything else
// is refused.
func jsonBytes(raw json.RawMessage) ([]byte, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, errors.New("not a JSON string")
	}
	in := raw[1 : len(raw)-1]
	out := make([]byte, 0, len(in))
	fail := func() ([]byte, error) {
		clear(out)
		return nil, errors.New("unsupported character")
	}
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\' && i+1 < len(in):
			i++
			switch in[i] {
			case '/', '\\', '"':
				out = append(out, in[i])
			case 'u':
				if i+4 >= len(in) {
					return fail()
				}
				v, err := strconv.ParseUint(string(in[i+1:i+5]), 16, 16)
				if err != nil || v < 0x20 || v > 0x7e {
					return fail()
				}
				out = append(out, byte(v))
				i += 4
			default:
				return fail()
			}
		case c < 0x20 || c > 0x7e || c == '"' || c == '\\':
			return fail()
		default:
			out = append(out, c)
		}
	}
	return out, nil
}
