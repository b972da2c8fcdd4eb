// Command proxyout-pki writes the test bed's keys and certificates into a directory:
// a cluster CA, the API server's serving and kubelet-client certificates, the node
// stand-in's serving certificate, a client-certificate user and the service-account
// signing key. ECDSA P-256 throughout: generating everything takes milliseconds.
//
// With --client NAME --valid DURATION it writes only NAME.crt and NAME.key, a client certificate
// for user NAME in system:masters signed by the directory's CA and valid for DURATION from now:
// a certificate that expires while a test runs.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type pair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func main() {
	dir := flag.String("dir", "", "directory to write into")
	client := flag.String("client", "", "write only a client certificate for this user, signed by DIR's CA")
	valid := flag.Duration("valid", time.Hour, "with --client: how long the certificate is valid from now")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: proxyout-pki --dir DIR [--client NAME --valid DURATION]")
		os.Exit(2)
	}
	run := run
	if *client != "" {
		run = func(dir string) error { return clientCert(dir, *client, *valid) }
	}
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "proxyout-pki:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := newCert(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "proxyout-test-ca"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	})
	if err != nil {
		return err
	}
	if err := write(dir, "ca", ca); err != nil {
		return err
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	certs := []struct {
		name string
		tmpl *x509.Certificate
	}{
		{"apiserver", &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPAddresses: append(loopback, net.ParseIP("10.96.0.1")),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{"apiserver-kubelet-client", &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
		{"node", &x509.Certificate{
			Subject:     pkix.Name{CommonName: "proxyout-node"},
			DNSNames:    []string{"localhost"},
			IPAddresses: loopback,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}},
		{"cert-user", &x509.Certificate{
			Subject:     pkix.Name{CommonName: "proxyout-cert-user", Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	}
	for _, c := range certs {
		c.tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		p, err := newCert(ca, c.tmpl)
		if err != nil {
			return err
		}
		if err := write(dir, c.name, p); err != nil {
			return err
		}
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), saKey); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

func clientCert(dir, name string, valid time.Duration) error {
	ca, err := readPair(filepath.Join(dir, "ca"))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name, Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	p, err := newCert(ca, tmpl)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute), now.Add(valid)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &p.key.PublicKey, ca.key)
	if err != nil {
		return err
	}
	if p.cert, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	return write(dir, name, p)
}

func readPair(base string) (*pair, error) {
	crtPEM, err := os.ReadFile(base + ".crt")
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(base + ".key")
	if err != nil {
		return nil, err
	}
	crtBlock, _ := pem.Decode(crtPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if crtBlock == nil || keyBlock == nil {
		return nil, fmt.Errorf("%s: no PEM", base)
	}
	cert, err := x509.ParseCertificate(crtBlock.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, err
	}
	return &pair{cert: cert, key: key}, nil
}

func newCert(parent *pair, tmpl *x509.Certificate) (*pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(10 * 365 * 24 * time.Hour)
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &pair{cert: cert, key: key}, nil
}

func write(dir, name string, p *pair) error {
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw})
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), crt, 0o600); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), p.key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}
