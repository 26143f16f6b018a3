package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The example exchanges of RFC 5802 §5 (SCRAM-SHA-1) and RFC 7677 §3
// (SCRAM-SHA-256): user "user", password "pencil". No RFC has one for
// SCRAM-SHA-512; its vector is the exchange Apache Qpid's AMQP clients
// (proton-j, Qpid JMS) test their SCRAM-SHA-512 against, in the style of
// RFC 7677 §3 (same user, password and client nonce), and was checked with
// Python's hashlib.pbkdf2_hmac and hmac, an implementation independent of
// this package's. TestScramAgainstAnIndependentServer checks every hash
// once more against a server built on crypto/pbkdf2.
var scramVectors = []struct {
	name        string
	client      func(nonce string) *scramClient
	nonce       string
	clientFirst string
	serverFirst string
	clientFinal string
	serverFinal string
}{
	{
		name:        "RFC 5802 SCRAM-SHA-1",
		client:      func(n string) *scramClient { return newScram("SCRAM-SHA-1", sha1.New, "user", []byte("pencil"), n) },
		nonce:       "fyko+d2lbbFgONRv9qkxdawL",
		clientFirst: "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
		serverFirst: "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
		clientFinal: "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
		serverFinal: "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
	},
	{
		name:        "RFC 7677 SCRAM-SHA-256",
		client:      func(n string) *scramClient { return newScram("SCRAM-SHA-256", sha256.New, "user", []byte("pencil"), n) },
		nonce:       "rOprNGfwEbeRWgbNEkqO",
		clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
		serverFirst: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		clientFinal: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
		serverFinal: "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
	},
	{
		name:        "SCRAM-SHA-512",
		client:      func(n string) *scramClient { return newScram("SCRAM-SHA-512", sha512.New, "user", []byte("pencil"), n) },
		nonce:       "rOprNGfwEbeRWgbNEkqO",
		clientFirst: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
		serverFirst: "r=rOprNGfwEbeRWgbNEkqO02431b08-2f89-4bad-a4e6-80c0564ec865,s=Yin2FuHTt/M0kJWb0t9OI32n2VmOGi3m+JfjOvuDF88=,i=4096",
		clientFinal: "c=biws,r=rOprNGfwEbeRWgbNEkqO02431b08-2f89-4bad-a4e6-80c0564ec865,p=Hc5yec3NmCD7t+kFRw4/3yD6/F3SQHc7AVYschRja+Bc3sbdjlA0eH1OjJc0DD4ghn1tnXN5/Wr6qm9xmaHt4A==",
		serverFinal: "v=BQuhnKHqYDwQWS5jAw4sZed+C9KFUALsbrq81bB0mh+bcUUbbMPNNmBIupnS2AmyyDnG5CTBQtkjJ9kyY4kzmw==",
	},
}

func TestScramRFCVectors(t *testing.T) {
	for _, v := range scramVectors {
		t.Run(v.name, func(t *testing.T) {
			srv := &scripted{challenges: []string{v.serverFirst, v.serverFinal}}
			c := v.client(v.nonce)
			require.NoError(t, Authenticate(srv, c))
			require.Equal(t, c.mech, srv.mech)
			require.Equal(t, v.clientFirst, string(srv.ir))
			require.Equal(t, []string{v.clientFinal, ""}, srv.responses)
		})
	}
}

func TestScramTamperedServerSignatureIsRefused(t *testing.T) {
	for _, v := range scramVectors {
		t.Run(v.name, func(t *testing.T) {
			// Flip one character of the signature, keeping it base64.
			sig := []byte(v.serverFinal)
			i := len("v=") + 3
			if sig[i] == 'A' {
				sig[i] = 'B'
			} else {
				sig[i] = 'A'
			}
			srv := &scripted{challenges: []string{v.serverFirst, string(sig)}}
			err := Authenticate(srv, v.client(v.nonce))
			require.ErrorIs(t, err, ErrServerSignatureMismatch)
			require.Len(t, srv.responses, 1, "no answer to the forged server-final")
			requireNoSecret(t, err, "pencil", "user")
		})
	}
}

func TestScramSuccessWithoutServerSignatureIsRefused(t *testing.T) {
	v := scramVectors[1]
	// The server accepts the proof but never sends server-final.
	srv := &scripted{challenges: []string{v.serverFirst}}
	err := Authenticate(srv, v.client(v.nonce))
	require.ErrorIs(t, err, ErrServerNotVerified)
}

func TestScramServerNOIsReturned(t *testing.T) {
	v := scramVectors[1]
	srv := &scripted{challenges: []string{v.serverFirst}, final: errServerNO}
	require.ErrorIs(t, Authenticate(srv, v.client(v.nonce)), errServerNO)
}

func TestScramServerErrorValue(t *testing.T) {
	v := scramVectors[1]
	for final, want := range map[string]string{
		"e=invalid-proof":                     "invalid-proof",
		"e=unknown-user,ext=1":                "unknown-user",
		"e=the admin says: password is wrong": "other-error",
	} {
		srv := &scripted{challenges: []string{v.serverFirst, final}}
		err := Authenticate(srv, v.client(v.nonce))
		var se *ScramServerError
		require.ErrorAs(t, err, &se, final)
		require.Equal(t, want, se.Value)
		require.NotContains(t, err.Error(), "admin")
	}
}

func TestScramIterationCountBounds(t *testing.T) {
	v := scramVectors[1]
	serverFirst := func(i string) string {
		return strings.Replace(v.serverFirst, "i=4096", "i="+i, 1)
	}
	for _, tc := range []struct {
		count     string
		accepted  bool
		malformed bool
	}{
		{"4096", true, false},
		{strconv.Itoa(MaxIterations), true, false},
		{"4095", false, false},
		{"1", false, false},
		{strconv.Itoa(MaxIterations + 1), false, false},
		{"2147483648", false, false},
		{"99999999999999999999", false, true},
		{"0", false, true},
		{"-4096", false, true},
		{"04096", false, true},
		{"4096x", false, true},
		{"", false, true},
	} {
		t.Run(tc.count, func(t *testing.T) {
			c := v.client(v.nonce)
			_, _, err := c.Start()
			require.NoError(t, err)
			resp, err := c.Next([]byte(serverFirst(tc.count)))
			switch {
			case tc.accepted:
				require.NoError(t, err)
				require.NotEmpty(t, resp)
			case tc.malformed:
				require.ErrorIs(t, err, ErrMalformedChallenge)
			default:
				var ie *IterationCountError
				require.ErrorAs(t, err, &ie)
				require.Equal(t, MinIterations, ie.Min)
				require.Equal(t, MaxIterations, ie.Max)
			}
			if err != nil {
				// A failed client stays failed.
				_, err2 := c.Next([]byte(v.serverFinal))
				require.Equal(t, err, err2)
			}
		})
	}
}

func TestScramMalformedServerFirst(t *testing.T) {
	v := scramVectors[1]
	nonce := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	for name, serverFirst := range map[string]string{
		"mandatory extension":          "m=ext," + v.serverFirst,
		"nonce not extending ours":     "r=XOprNGfwEbeRWgbNEkqO%hvY,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		"nonce equal to ours":          "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		"nonce with a space":           "r=rOprNGfwEbeRWgbNEkqO abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		"no nonce":                     "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
		"salt and count swapped":       nonce + ",i=4096,s=W22ZaJ0SNY7soEsUEjb6gQ==",
		"salt not base64":              nonce + ",s=W22ZaJ0SNY7so!sUEjb6gQ==,i=4096",
		"empty salt":                   nonce + ",s=,i=4096",
		"no iteration count":           nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==",
		"empty message":                "",
		"iteration count not a number": nonce + ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=lots",
	} {
		t.Run(name, func(t *testing.T) {
			c := v.client(v.nonce)
			_, _, err := c.Start()
			require.NoError(t, err)
			_, err = c.Next([]byte(serverFirst))
			require.ErrorIs(t, err, ErrMalformedChallenge)
			require.NotContains(t, err.Error(), "W22ZaJ0", "the challenge is not quoted")
		})
	}
	// Extensions after the iteration count are allowed (RFC 5802 §7).
	c := v.client(v.nonce)
	_, _, _ = c.Start()
	resp, err := c.Next([]byte(v.serverFirst + ",x=ignored"))
	require.NoError(t, err)
	require.Contains(t, string(resp), "p=")
}

func TestScramMalformedServerFinal(t *testing.T) {
	v := scramVectors[1]
	for _, final := range []string{"", "x=1", "v=not base64!"} {
		srv := &scripted{challenges: []string{v.serverFirst, final}}
		require.ErrorIs(t, Authenticate(srv, v.client(v.nonce)), ErrMalformedChallenge, final)
	}
	// A challenge after server-final is refused.
	srv := &scripted{challenges: []string{v.serverFirst, v.serverFinal, "more"}}
	require.Error(t, Authenticate(srv, v.client(v.nonce)))
}

func TestScramUsernameEscaping(t *testing.T) {
	for user, want := range map[string]string{
		"user":              "n=user",
		"a=b":               "n=a=3Db",
		"a,b":               "n=a=2Cb",
		"=,=":               "n==3D=2C=3D",
		"alice@example.org": "n=alice@example.org",
		"Ｕser":              "n=User", // SASLprep: NFKC maps the fullwidth letter
	} {
		c := newScram("SCRAM-SHA-256", sha256.New, user, []byte("pw"), "nonce")
		_, ir, err := c.Start()
		require.NoError(t, err)
		require.Equal(t, "n,,"+want+",r=nonce", string(ir), user)
	}
	c := newScram("SCRAM-SHA-256", sha256.New, "bad\x07user", []byte("pw"), "nonce")
	_, _, err := c.Start()
	require.ErrorIs(t, err, ErrUsernameNotPreparable)
	requireNoSecret(t, err, "bad")
}

func TestScramPasswordIsSASLprepped(t *testing.T) {
	v := scramVectors[0]
	// RFC 4013 §3: SOFT HYPHEN maps to nothing, so "pen\u00ADcil"
	// authenticates as "pencil"; so does the fullwidth form under NFKC.
	for _, pw := range []string{"pen\u00ADcil", "ｐｅｎｃｉｌ", "pen\u200Dcil"} {
		c := newScram("SCRAM-SHA-1", sha1.New, "user", []byte(pw), v.nonce)
		srv := &scripted{challenges: []string{v.serverFirst, v.serverFinal}}
		require.NoError(t, Authenticate(srv, c), "%q", pw)
		require.Equal(t, v.clientFinal, srv.responses[0])
	}
	// A prohibited character fails before anything is derived, and the
	// error does not name it.
	for _, pw := range []string{"pen\x07cil", "pen\ufffecil", "\u0627\u0031", "pen\xffcil"} {
		c := newScram("SCRAM-SHA-1", sha1.New, "user", []byte(pw), v.nonce)
		srv := &scripted{challenges: []string{v.serverFirst, v.serverFinal}}
		err := Authenticate(srv, c)
		require.ErrorIs(t, err, ErrPasswordNotPreparable, "%q", pw)
		requireNoSecret(t, err, "pen", "\\u0007", "0007", "\\x07")
		require.Empty(t, srv.responses)
	}
}

func TestScramLeavesPasswordUntouched(t *testing.T) {
	v := scramVectors[1]
	pw := []byte("pencil")
	c := newScram("SCRAM-SHA-256", sha256.New, "user", pw, v.nonce)
	srv := &scripted{challenges: []string{v.serverFirst, v.serverFinal}}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, "pencil", string(pw))
	require.Equal(t, make([]byte, len(c.serverSignature)), c.serverSignature, "cleared")
}

func TestScramRandomNonce(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		_, ir, err := NewScramSHA256Client("user", []byte("pw")).Start()
		require.NoError(t, err)
		nonce, ok := strings.CutPrefix(string(ir), "n,,n=user,r=")
		require.True(t, ok)
		require.True(t, printable(nonce))
		require.GreaterOrEqual(t, len(nonce), 24)
		require.False(t, seen[nonce])
		seen[nonce] = true
	}
	mech, _, _ := NewScramSHA1Client("u", []byte("p")).Start()
	require.Equal(t, "SCRAM-SHA-1", mech)
}

func TestHiIsPBKDF2(t *testing.T) {
	for _, iter := range []int{1, 2, 4096} {
		got1 := hi(sha1.New, []byte("pencil"), []byte("salt"), iter)
		want1, err := pbkdf2.Key(sha1.New, "pencil", []byte("salt"), iter, sha1.Size)
		require.NoError(t, err)
		require.Equal(t, want1, got1, "SHA-1, %d", iter)
		got256 := hi(sha256.New, []byte("pencil"), []byte("salt"), iter)
		want256, err := pbkdf2.Key(sha256.New, "pencil", []byte("salt"), iter, sha256.Size)
		require.NoError(t, err)
		require.Equal(t, want256, got256, "SHA-256, %d", iter)
		got512 := hi(sha512.New, []byte("pencil"), []byte("salt"), iter)
		want512, err := pbkdf2.Key(sha512.New, "pencil", []byte("salt"), iter, sha512.Size)
		require.NoError(t, err)
		require.Equal(t, want512, got512, "SHA-512, %d", iter)
	}
}

// independentServer is the server side of RFC 5802 written apart from the
// client: it stores only StoredKey and ServerKey, derived with
// crypto/pbkdf2 rather than this package's hi, and accepts a proof the way
// a server does, by recovering ClientKey from it and comparing its hash
// with StoredKey.
type independentServer struct {
	t         *testing.T
	h         func() hash.Hash
	salt      []byte
	iter      int
	storedKey []byte
	serverKey []byte
	accepted  bool
}

func newIndependentServer(t *testing.T, h func() hash.Hash, password string) *independentServer {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	size := h().Size()
	salted, err := pbkdf2.Key(h, password, salt, 4096, size)
	require.NoError(t, err)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	d := h()
	d.Write(mac(salted, "Client Key"))
	return &independentServer{t: t, h: h, salt: salt, iter: 4096, storedKey: d.Sum(nil), serverKey: mac(salted, "Server Key")}
}

func (s *independentServer) Authenticate(c Client) error {
	_, ir, err := c.Start()
	if err != nil {
		return err
	}
	clientFirstBare := strings.TrimPrefix(string(ir), "n,,")
	_, clientNonce, _ := strings.Cut(clientFirstBare, ",r=")
	serverFirst := "r=" + clientNonce + "independent,s=" + base64.StdEncoding.EncodeToString(s.salt) + ",i=" + strconv.Itoa(s.iter)
	resp, err := c.Next([]byte(serverFirst))
	if err != nil {
		return err
	}
	withoutProof, proofB64, ok := strings.Cut(string(resp), ",p=")
	require.True(s.t, ok)
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	require.NoError(s.t, err)
	authMessage := clientFirstBare + "," + serverFirst + "," + withoutProof
	m := hmac.New(s.h, s.storedKey)
	m.Write([]byte(authMessage))
	clientKey := m.Sum(nil)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	d := s.h()
	d.Write(clientKey)
	if !hmac.Equal(d.Sum(nil), s.storedKey) {
		return errServerNO
	}
	s.accepted = true
	m = hmac.New(s.h, s.serverKey)
	m.Write([]byte(authMessage))
	_, err = c.Next([]byte("v=" + base64.StdEncoding.EncodeToString(m.Sum(nil))))
	return err
}

func TestScramAgainstAnIndependentServer(t *testing.T) {
	const password = "correct horse battery staple"
	for _, tc := range []struct {
		client func(user string, password []byte) Client
		h      func() hash.Hash
	}{
		{NewScramSHA1Client, sha1.New},
		{NewScramSHA256Client, sha256.New},
		{NewScramSHA512Client, sha512.New},
	} {
		srv := newIndependentServer(t, tc.h, password)
		c := tc.client("someone", []byte(password))
		require.NoError(t, Authenticate(srv, c))
		require.True(t, srv.accepted)

		// The wrong password is refused by the server, not by the client.
		srv = newIndependentServer(t, tc.h, password)
		require.ErrorIs(t, Authenticate(srv, tc.client("someone", []byte("wrong"))), errServerNO)
		require.False(t, srv.accepted)
	}
}

func TestScramStartTwice(t *testing.T) {
	c := NewScramSHA256Client("u", []byte("p"))
	_, _, err := c.Start()
	require.NoError(t, err)
	_, _, err = c.Start()
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrMalformedChallenge))
}
