package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// BenchmarkRelayCPU measures the coordinator's attach relay (tunnel stream
// → SSE client: frame parsing, the UTF-8 check and JSON escaping, two TLS
// hops) against io.Copy between two TLS sockets, in the same run (issue
// 18's target: coordinator CPU per MiB relayed ≤ 3× the copy's). Both
// carry the same 16 KiB text frames of a flood. It reports:
//
//	copy-cpu-ns/MiB, relay-cpu-ns/MiB  process CPU (user+sys) per MiB in
//	x-copy                             relay ÷ copy, whole process
//	x-copy-middle                      the same with the ends' own cost (a
//	                                   direct TLS hop of the bytes) taken
//	                                   off both: the middle alone
func BenchmarkRelayCPU(b *testing.B) {
	const total = 32 << 20
	chunk := []byte(strings.Repeat("abcdefgh ", 16<<10/9) + "\n")
	var frames []byte
	for seq, n := uint64(0), 0; n < total; seq, n = seq+1, n+len(chunk) {
		p := proto.AppendOutput(nil, seq, 0, 1, time.Unix(1700000000, 0), chunk)
		frames = appendFrame(frames, p)
	}
	conf := benchTLS(b)
	var direct, copied, relayed time.Duration
	for b.Loop() {
		direct += cpuOf(b, func() { hop(b, conf, frames, nil) })
		copied += cpuOf(b, func() {
			hop(b, conf, frames, func(in net.Conn, out net.Conn) { io.Copy(out, in) })
		})
		relayed += cpuOf(b, func() {
			hop(b, conf, frames, func(in net.Conn, out net.Conn) {
				// The sender here is faster than any child: a queue that
				// holds it all, so that nothing is dropped.
				o := testAttachOptions()
				o.Buffer = 2 * len(frames)
				if end := relay(context.Background(), in, connSink{out}, o); end != relayLost {
					b.Errorf("relay ended %v, want lost (the end of the frames)", end)
				}
			})
		})
	}
	mib := float64(b.N) * float64(len(frames)) / (1 << 20)
	b.ReportMetric(float64(copied.Nanoseconds())/mib, "copy-cpu-ns/MiB")
	b.ReportMetric(float64(relayed.Nanoseconds())/mib, "relay-cpu-ns/MiB")
	b.ReportMetric(float64(relayed)/float64(copied), "x-copy")
	if copied > direct {
		b.ReportMetric(float64(relayed-direct)/float64(copied-direct), "x-copy-middle")
	}
}

func appendFrame(b, p []byte) []byte {
	var w sliceWriter
	wire.WriteFrame(&w, p)
	return append(b, w...)
}

type sliceWriter []byte

func (w *sliceWriter) Write(p []byte) (int, error) { *w = append(*w, p...); return len(p), nil }

// connSink is an SSE client on a bare connection.
type connSink struct{ net.Conn }

func (connSink) Flush() error { return nil }

// hop sends data over TLS to middle, which passes it on over a second TLS
// connection to a reader that discards it; with middle nil, the sender
// talks to the reader directly (one hop).
func hop(b *testing.B, conf *tls.Config, data []byte, middle func(in, out net.Conn)) {
	in1, in2 := tlsPair(b, conf)
	done := make(chan struct{})
	go func() {
		in1.Write(data)
		in1.Close()
	}()
	if middle == nil {
		io.Copy(io.Discard, in2)
		in2.Close()
		return
	}
	out1, out2 := tlsPair(b, conf)
	go func() {
		if n, _ := io.Copy(io.Discard, out2); n < int64(len(data)) {
			b.Errorf("the reader got %d bytes of %d", n, len(data))
		}
		close(done)
	}()
	middle(in2, out1)
	in2.Close()
	out1.Close()
	<-done
	out2.Close()
}

func cpuOf(b *testing.B, fn func()) time.Duration {
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	fn()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	return time.Duration(r1.Utime.Nano()-r0.Utime.Nano()) + time.Duration(r1.Stime.Nano()-r0.Stime.Nano())
}

// tlsPair returns the two ends of a TLS 1.3 connection over loopback TCP.
func tlsPair(b *testing.B, conf *tls.Config) (client, server net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			acc <- nil
			return
		}
		s := tls.Server(c, conf)
		s.Handshake()
		acc <- s
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if err != nil {
		b.Fatal(err)
	}
	return c, <-acc
}

func benchTLS(b *testing.B) *tls.Config {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		b.Fatal(err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
