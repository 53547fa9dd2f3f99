package certs

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

const (
	pemCert = "CERTIFICATE"
	// Keys are written as PKCS #8; ParseKeyPEM also reads SEC 1 ("EC PRIVATE
	// KEY") so that keys made with openssl ecparam can be imported.
	pemKey   = "PRIVATE KEY"
	pemECKey = "EC PRIVATE KEY"
)

// EncodeCertPEM encodes each DER certificate as a CERTIFICATE block, in order.
func EncodeCertPEM(der ...[]byte) []byte {
	var out []byte
	for _, d := range der {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: d})...)
	}
	return out
}

// EncodeKeyPEM encodes key as a PKCS #8 "PRIVATE KEY" block.
func EncodeKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	if key == nil {
		return nil, errors.New("certs: nil private key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemKey, Bytes: der}), nil
}

// ParseCertsPEM parses every CERTIFICATE block in b, in order. Text outside
// PEM blocks is ignored (as in common CA bundles); a block of any other type,
// a certificate that does not parse, or no certificate at all is an error.
func ParseCertsPEM(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != pemCert {
			return nil, fmt.Errorf("certs: unexpected PEM block %q, want %q", block.Type, pemCert)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certs: parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("certs: no PEM certificate found")
	}
	return certs, nil
}

// ParseKeyPEM parses the first PEM block of b as an ECDSA private key, either
// PKCS #8 ("PRIVATE KEY", as EncodeKeyPEM writes) or SEC 1 ("EC PRIVATE KEY").
func ParseKeyPEM(b []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("certs: no PEM private key found")
	}
	switch block.Type {
	case pemKey:
		return parsePKCS8EC(block.Bytes)
	case pemECKey:
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certs: parse private key: %w", err)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("certs: unexpected PEM block %q, want %q", block.Type, pemKey)
	}
}

// WriteFileAtomic replaces path with data, mode perm. It writes a temporary
// file in the same directory, syncs it, sets perm and renames it over path,
// then syncs the directory; readers see the old content or the new, never a
// mix. The temporary file is created 0600, so secret data is never readable by
// others even before the chmod. On error the temporary file is removed.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("certs: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("certs: write %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes a rename or remove in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func parsePKCS8EC(der []byte) (*ecdsa.PrivateKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse private key: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("certs: private key is %T, want ECDSA", k)
	}
	return ek, nil
}
