// Package webpush sends Web Push messages: the payload encrypted for the
// subscription as RFC 8291 says (aes128gcm content coding, RFC 8188), and
// the sender identified by a VAPID JWT (RFC 8292), POSTed to the push
// service's endpoint (RFC 8030).
package webpush

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// b64 is the unpadded base64url the Push API and VAPID use.
var b64 = base64.RawURLEncoding

// Subscription is what a browser's PushManager.subscribe gives: the push
// service's endpoint, the user agent's P-256 public key (p256dh) and the
// 16-byte authentication secret, both base64url.
type Subscription struct {
	Endpoint string
	P256dh   string
	Auth     string
}

// Check validates a subscription's fields.
func (s Subscription) Check() error {
	u, err := url.Parse(s.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("the endpoint is not an absolute http or https URL")
	}
	pub, err := decodeB64(s.P256dh)
	if err != nil {
		return errors.New("keys.p256dh is not base64url")
	}
	if _, err := ecdh.P256().NewPublicKey(pub); err != nil {
		return errors.New("keys.p256dh is not an uncompressed P-256 public key")
	}
	auth, err := decodeB64(s.Auth)
	if err != nil || len(auth) != 16 {
		return errors.New("keys.auth is not 16 bytes of base64url")
	}
	return nil
}

// decodeB64 takes base64url with or without padding (browsers differ).
func decodeB64(s string) ([]byte, error) {
	return b64.DecodeString(trimPad(s))
}

func trimPad(s string) string {
	for len(s) > 0 && s[len(s)-1] == '=' {
		s = s[:len(s)-1]
	}
	return s
}

// recordSize is the one record's size in the aes128gcm header.
const recordSize = 4096

// Encrypt is RFC 8291's encryption of plaintext for sub: one aes128gcm
// record whose header carries a random salt and the sender's ephemeral
// public key. The plaintext must fit one record (at most 3993 bytes).
func Encrypt(sub Subscription, plaintext []byte) ([]byte, error) {
	if len(plaintext) > recordSize-16-1-103 {
		return nil, fmt.Errorf("webpush: a payload of %d bytes is over the one record", len(plaintext))
	}
	uaBytes, err := decodeB64(sub.P256dh)
	if err != nil {
		return nil, err
	}
	ua, err := ecdh.P256().NewPublicKey(uaBytes)
	if err != nil {
		return nil, err
	}
	auth, err := decodeB64(sub.Auth)
	if err != nil {
		return nil, err
	}
	as, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	salt := make([]byte, 16)
	rand.Read(salt)
	cek, nonce, err := keys(as, ua, auth, salt, as.PublicKey().Bytes(), uaBytes)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(cek)
	if err != nil {
		return nil, err
	}
	// The last (and only) record ends with the delimiter 2 (RFC 8188).
	ct := gcm.Seal(nil, nonce, append(append([]byte(nil), plaintext...), 2), nil)
	asPub := as.PublicKey().Bytes()
	var out bytes.Buffer
	out.Write(salt)
	binary.Write(&out, binary.BigEndian, uint32(recordSize))
	out.WriteByte(byte(len(asPub)))
	out.Write(asPub)
	out.Write(ct)
	return out.Bytes(), nil
}

// Decrypt is the user agent's side of Encrypt, given its private key and
// authentication secret (the tests' push receiver uses it).
func Decrypt(ua *ecdh.PrivateKey, auth, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("webpush: short body")
	}
	salt, idlen := body[:16], int(body[20])
	if len(body) < 21+idlen {
		return nil, errors.New("webpush: short header")
	}
	asBytes, ct := body[21:21+idlen], body[21+idlen:]
	as, err := ecdh.P256().NewPublicKey(asBytes)
	if err != nil {
		return nil, err
	}
	cek, nonce, err := keys(ua, as, auth, salt, asBytes, ua.PublicKey().Bytes())
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(cek)
	if err != nil {
		return nil, err
	}
	pt, err := gcm.Open(nil, nonce, ct, nil)
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(pt, 2)
	if i < 0 || len(bytes.Trim(pt[i+1:], "\x00")) != 0 {
		return nil, errors.New("webpush: no last-record delimiter")
	}
	return pt[:i], nil
}

// keys derives the content encryption key and nonce (RFC 8291, section 3.4): own
// is this side's private key, peer the other's public key.
func keys(own *ecdh.PrivateKey, peer *ecdh.PublicKey, auth, salt, asPub, uaPub []byte) (cek, nonce []byte, err error) {
	secret, err := own.ECDH(peer)
	if err != nil {
		return nil, nil, err
	}
	keyInfo := append(append([]byte("WebPush: info\x00"), uaPub...), asPub...)
	prkKey, err := hkdf.Extract(sha256.New, secret, auth)
	if err != nil {
		return nil, nil, err
	}
	ikm, err := hkdf.Expand(sha256.New, prkKey, string(keyInfo), 32)
	if err != nil {
		return nil, nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, nil, err
	}
	if cek, err = hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16); err != nil {
		return nil, nil, err
	}
	nonce, err = hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	return cek, nonce, err
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// --- VAPID ---

// NewVAPIDKey generates an application server key pair (P-256).
func NewVAPIDKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// PublicKey is the key's uncompressed point, base64url: the
// applicationServerKey a browser subscribes with, and VAPID's k.
func PublicKey(k *ecdsa.PrivateKey) string {
	b, _ := k.PublicKey.ECDH()
	return b64.EncodeToString(b.Bytes())
}

// MarshalKey and ParseKey store a key as PKCS #8 PEM.
func MarshalKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func ParseKey(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("webpush: no PEM block in the VAPID key file")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errors.New("webpush: the VAPID key is not a P-256 key")
	}
	return ek, nil
}

// VAPIDHeader is the Authorization header of a push to endpoint (RFC
// 8292): an ES256 JWT for the endpoint's origin, valid 12 hours, and the
// public key.
func VAPIDHeader(k *ecdsa.PrivateKey, endpoint, subject string, now time.Time) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	hdr := b64.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))
	claims, _ := json.Marshal(map[string]any{"aud": u.Scheme + "://" + u.Host, "exp": now.Add(12 * time.Hour).Unix(), "sub": subject})
	signing := hdr + "." + b64.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return "vapid t=" + signing + "." + b64.EncodeToString(sig) + ", k=" + PublicKey(k), nil
}

// VerifyVAPID checks an Authorization header as a push service does: the
// JWT's ES256 signature by k, its audience and expiry. It answers the
// claims.
func VerifyVAPID(header, audience string, now time.Time) (map[string]any, error) {
	var t, k string
	if _, err := fmt.Sscanf(header, "vapid t=%s k=%s", &t, &k); err != nil {
		return nil, fmt.Errorf("webpush: not a vapid header: %w", err)
	}
	t = trimComma(t)
	pubBytes, err := decodeB64(k)
	if err != nil {
		return nil, err
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pubBytes) // the uncompressed point VAPID sends
	if err != nil {
		return nil, errors.New("webpush: k is not a P-256 point")
	}
	parts := bytes.Split([]byte(t), []byte("."))
	if len(parts) != 3 {
		return nil, errors.New("webpush: t is not a JWT")
	}
	sig, err := b64.DecodeString(string(parts[2]))
	if err != nil || len(sig) != 64 {
		return nil, errors.New("webpush: bad JWT signature encoding")
	}
	sum := sha256.Sum256([]byte(string(parts[0]) + "." + string(parts[1])))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, errors.New("webpush: the JWT's signature does not verify")
	}
	raw, err := b64.DecodeString(string(parts[1]))
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, err
	}
	if claims["aud"] != audience {
		return nil, fmt.Errorf("webpush: aud %v, want %s", claims["aud"], audience)
	}
	if exp, _ := claims["exp"].(float64); int64(exp) <= now.Unix() || int64(exp) > now.Add(24*time.Hour).Unix() {
		return nil, errors.New("webpush: exp is past or more than 24 hours ahead")
	}
	return claims, nil
}

func trimComma(s string) string {
	if n := len(s); n > 0 && s[n-1] == ',' {
		return s[:n-1]
	}
	return s
}

// Request is the push of one message to sub: the encrypted body and the
// headers RFC 8030 and RFC 8291 ask for.
func Request(k *ecdsa.PrivateKey, sub Subscription, subject string, payload []byte, ttl time.Duration, urgency string, now time.Time) (*http.Request, error) {
	body, err := Encrypt(sub, payload)
	if err != nil {
		return nil, err
	}
	auth, err := VAPIDHeader(k, sub.Endpoint, subject, now)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(http.MethodPost, sub.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Encoding", "aes128gcm")
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("TTL", strconv.Itoa(int(ttl.Seconds())))
	if urgency != "" {
		req.Header.Set("Urgency", urgency)
	}
	req.Header.Set("Authorization", auth)
	return req, nil
}
