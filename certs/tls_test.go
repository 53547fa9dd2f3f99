package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestVerifyPinned(t *testing.T) {
	a, _ := newTestAuthority(t)
	other, _ := newTestAuthority(t)
	now := time.Now()
	server, err := a.IssueServer([]string{"coordinator.test"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.IssueServer([]string{"coordinator.test"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	node, _ := mustNodeCert(t, a, "n1")
	leaf, ca := server.Certificate[0], a.Current.Raw
	pin := Pin(a.Current)

	tests := []struct {
		name string
		pin  string
		raw  [][]byte
		want error
	}{
		{"right pin", pin, [][]byte{leaf, ca}, nil},
		{"right pin, extra certificates", pin, [][]byte{leaf, other.Current.Raw, []byte("junk"), ca}, nil},
		{"wrong pin", Pin(other.Current), [][]byte{leaf, ca}, ErrPinMismatch},
		{"chain without CA", pin, [][]byte{leaf}, ErrPinMismatch},
		{"foreign leaf with our CA appended", pin, [][]byte{foreign.Certificate[0], ca}, ErrPinMismatch},
		{"client certificate as leaf", pin, [][]byte{node.Raw, ca}, ErrPinMismatch},
		{"CA alone", pin, [][]byte{ca}, ErrPinMismatch},
		{"pin of the leaf, not a CA", Pin(server.Leaf), [][]byte{leaf, leaf}, ErrPinMismatch},
		{"no certificates", pin, nil, ErrPinMismatch},
		{"garbage leaf", pin, [][]byte{[]byte("junk"), ca}, ErrPinMismatch},
		{"malformed pin", "sha256:abc", [][]byte{leaf, ca}, ErrPinFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifyPinned(tt.pin)(tt.raw, nil)
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// handshake runs a TLS handshake over net.Pipe and one byte of application
// data, so that a client certificate the server refuses fails on the client
// side too (in TLS 1.3 the client finishes its handshake first).
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) (state tls.ConnectionState, serverErr, clientErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sc, cc := net.Pipe()
	deadline, _ := ctx.Deadline()
	sc.SetDeadline(deadline)
	cc.SetDeadline(deadline)

	done := make(chan struct{})
	go func() {
		defer close(done)
		defer sc.Close()
		srv := tls.Server(sc, serverCfg)
		if serverErr = srv.HandshakeContext(ctx); serverErr != nil {
			return
		}
		state = srv.ConnectionState()
		_, serverErr = srv.Write([]byte{1})
	}()
	cl := tls.Client(cc, clientCfg)
	clientErr = cl.HandshakeContext(ctx)
	if clientErr == nil {
		_, clientErr = io.ReadFull(cl, make([]byte, 1))
	}
	cc.Close()
	<-done
	return state, serverErr, clientErr
}

func TestMutualTLS(t *testing.T) {
	a, _ := newTestAuthority(t)
	other, _ := newTestAuthority(t)
	now := time.Now()
	server, err := a.IssueServer([]string{"coordinator.test", "127.0.0.1"}, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	clientCert := func(a *Authority) tls.Certificate {
		cert, key := mustNodeCert(t, a, "node-1")
		return tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}
	}
	serverCfg := &tls.Config{
		MinVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{server},
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              a.Pool(),
		SessionTicketsDisabled: true,
	}

	tests := []struct {
		name    string
		client  []tls.Certificate
		roots   *x509.CertPool
		wantErr bool
	}{
		{"node certificate", []tls.Certificate{clientCert(a)}, a.Pool(), false},
		{"node certificate from another authority", []tls.Certificate{clientCert(other)}, a.Pool(), true},
		{"server certificate as client certificate", []tls.Certificate{server}, a.Pool(), true},
		{"no client certificate", nil, a.Pool(), true},
		{"client does not trust the server", []tls.Certificate{clientCert(a)}, other.Pool(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientCfg := &tls.Config{
				MinVersion:   tls.VersionTLS13,
				Certificates: tt.client,
				RootCAs:      tt.roots,
				ServerName:   "coordinator.test",
			}
			state, serverErr, clientErr := handshake(t, serverCfg, clientCfg)
			if tt.wantErr {
				if serverErr == nil || clientErr == nil {
					t.Errorf("got server error %v, client error %v, want both to fail", serverErr, clientErr)
				}
				return
			}
			if serverErr != nil || clientErr != nil {
				t.Fatalf("got server error %v, client error %v, want none", serverErr, clientErr)
			}
			if state.Version != tls.VersionTLS13 {
				t.Errorf("version: got %x, want %x", state.Version, tls.VersionTLS13)
			}
			if len(state.PeerCertificates) == 0 {
				t.Fatalf("server saw no client certificate")
			}
			if id, err := NodeID(state.PeerCertificates[0]); err != nil || id != "node-1" {
				t.Errorf("NodeID of the peer: got %q, %v, want node-1", id, err)
			}
		})
	}
}

// TestEnrollmentHandshake is the node's first dial: no CA yet, only the pin.
func TestEnrollmentHandshake(t *testing.T) {
	a, _ := newTestAuthority(t)
	other, _ := newTestAuthority(t)
	server, err := a.IssueServer([]string{"127.0.0.1"}, time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	serverCfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{server}, SessionTicketsDisabled: true}
	tests := []struct {
		name string
		pin  string
		want error
	}{
		{"right pin", Pin(a.Current), nil},
		{"wrong pin", Pin(other.Current), ErrPinMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientCfg := &tls.Config{
				MinVersion:            tls.VersionTLS13,
				InsecureSkipVerify:    true, // VerifyPinned does the verification
				VerifyPeerCertificate: VerifyPinned(tt.pin),
			}
			_, _, clientErr := handshake(t, serverCfg, clientCfg)
			if !errors.Is(clientErr, tt.want) {
				t.Errorf("got %v, want %v", clientErr, tt.want)
			}
		})
	}
}
