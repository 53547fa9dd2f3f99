package webpush

import (
	"crypto/ecdh"
	"strings"
	"testing"
	"time"
)

// RFC 8291 Appendix A: the user agent's side decrypts the RFC's message.
func TestRFC8291Vector(t *testing.T) {
	uaPriv, _ := b64.DecodeString("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94")
	ua, err := ecdh.P256().NewPrivateKey(uaPriv)
	if err != nil {
		t.Fatal(err)
	}
	if got := b64.EncodeToString(ua.PublicKey().Bytes()); got != "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4" {
		t.Fatalf("ua public: got %s", got)
	}
	auth, _ := b64.DecodeString("BTBZMqHH6r4Tts7J_aSIgg")
	body, _ := b64.DecodeString("DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
	pt, err := Decrypt(ua, auth, body)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(pt), "When I grow up, I want to be a watermelon"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// Encrypt then Decrypt with a fresh subscription; a wrong auth secret fails.
func TestEncryptRoundTrip(t *testing.T) {
	ua, _ := ecdh.P256().GenerateKey(nil)
	auth := []byte("0123456789abcdef")
	sub := Subscription{Endpoint: "https://push.example/x", P256dh: b64.EncodeToString(ua.PublicKey().Bytes()), Auth: b64.EncodeToString(auth)}
	if err := sub.Check(); err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{"", "hello", strings.Repeat("x", 3000)} {
		body, err := Encrypt(sub, []byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		pt, err := Decrypt(ua, auth, body)
		if err != nil || string(pt) != msg {
			t.Fatalf("round trip of %d bytes: %v", len(msg), err)
		}
		if _, err := Decrypt(ua, []byte("fedcba9876543210"), body); err == nil {
			t.Fatal("decrypted with another auth secret")
		}
	}
	if _, err := Encrypt(sub, make([]byte, 5000)); err == nil {
		t.Fatal("a payload over one record was encrypted")
	}
}

// A VAPID header verifies for its audience, and not for another or once
// expired.
func TestVAPID(t *testing.T) {
	k, _ := NewVAPIDKey()
	now := time.Unix(1_800_000_000, 0)
	h, err := VAPIDHeader(k, "https://push.example:8443/send/abc?x=1", "mailto:ops@example.test", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(h, "k="+PublicKey(k)) {
		t.Fatalf("header %q lacks k", h)
	}
	if _, err := VerifyVAPID(h, "https://push.example:8443", now); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyVAPID(h, "https://other.example", now); err == nil {
		t.Fatal("verified for another audience")
	}
	if _, err := VerifyVAPID(h, "https://push.example:8443", now.Add(13*time.Hour)); err == nil {
		t.Fatal("verified once expired")
	}
	other, _ := NewVAPIDKey()
	forged := strings.Replace(h, "k="+PublicKey(k), "k="+PublicKey(other), 1)
	if _, err := VerifyVAPID(forged, "https://push.example:8443", now); err == nil {
		t.Fatal("verified with another key")
	}
	pemKey, _ := MarshalKey(k)
	back, err := ParseKey(pemKey)
	if err != nil || PublicKey(back) != PublicKey(k) {
		t.Fatalf("key round trip: %v", err)
	}
}

// FuzzCheck: a subscription from a browser is untrusted input.
func FuzzCheck(f *testing.F) {
	f.Add("https://push.example/x", "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", "BTBZMqHH6r4Tts7J_aSIgg")
	f.Fuzz(func(t *testing.T, endpoint, p256dh, auth string) {
		sub := Subscription{Endpoint: endpoint, P256dh: p256dh, Auth: auth}
		if sub.Check() == nil {
			if _, err := Encrypt(sub, []byte("x")); err != nil {
				t.Fatalf("a checked subscription does not encrypt: %v", err)
			}
		}
	})
}
