package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
)

// proxyout/sshd: an SSH server (a new ed25519 host key per start; any user, any public key) whose
// sessions take exec requests: "cat" echoes stdin until its EOF, anything else answers
// "pod=<name> cmd=<command>\n"; exit status 0. Shells, ptys and forwarding are refused.
const imageSSH = "proxyout/sshd"

func startSSH(s *server, pod *corev1.Pod) error {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		return err
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(signer)
	go s.accept(func(conn net.Conn) { serveSSH(conn, cfg, pod) })
	return nil
}

func serveSSH(conn net.Conn, cfg *ssh.ServerConfig, pod *corev1.Pod) {
	sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go serveSession(ch, chReqs, pod)
	}
}

func serveSession(ch ssh.Channel, reqs <-chan *ssh.Request, pod *corev1.Pod) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "env":
			req.Reply(true, nil)
		case "exec":
			var cmd struct{ Command string }
			if ssh.Unmarshal(req.Payload, &cmd) != nil {
				req.Reply(false, nil)
				return
			}
			req.Reply(true, nil)
			if cmd.Command == "cat" {
				io.Copy(ch, ch)
			} else {
				fmt.Fprintf(ch, "pod=%s cmd=%s\n", pod.Name, cmd.Command)
			}
			status := make([]byte, 4)
			binary.BigEndian.PutUint32(status, 0)
			ch.SendRequest("exit-status", false, status)
			return
		default:
			req.Reply(false, nil)
		}
	}
}
