package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The "images" the stand-in can run. A container's image (its tag is ignored) decides what
// each of its declared ports serves:
//
//	proxyout/http   HTTP; every answer is "pod=<name> namespace=<ns> port=<containerPort>\n", with headers X-Pod-Name and X-Pod-UID
//	proxyout/echo   TCP echo
//	proxyout/bulk   on connect, sends BULK_BYTES (env, default 1 MiB) bytes, then closes
//	proxyout/none   nothing listens (port-forwarding to it is refused)
//
// and those of apps.go (proxyout/banner, halfclose, https, grpc, ws) and sshd.go (proxyout/sshd).
const (
	imageHTTP = "proxyout/http"
	imageEcho = "proxyout/echo"
	imageBulk = "proxyout/bulk"
	imageNone = "proxyout/none"
)

type server struct {
	l     net.Listener
	once  sync.Once
	conns sync.Map // net.Conn -> struct{}
	http  *http.Server
	stop  func(graceful bool) // a server of its own kind (gRPC), stopped by this
}

func (s *server) addr() string { return s.l.Addr().String() }

func (s *server) close() {
	s.once.Do(func() {
		if s.stop != nil {
			s.stop(false)
		}
		if s.http != nil {
			s.http.Close()
		}
		s.l.Close()
		s.conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
}

// shutdown stops accepting and lets what is in flight finish (HTTP: the answers being written;
// TCP: open connections) for up to timeout, then closes the rest.
func (s *server) shutdown(timeout time.Duration) {
	if timeout > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if s.stop != nil {
			done := make(chan struct{})
			go func() { s.stop(true); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
			}
		} else if s.http != nil {
			s.http.Shutdown(ctx)
		} else {
			s.l.Close()
			for ctx.Err() == nil {
				open := false
				s.conns.Range(func(_, _ any) bool { open = true; return false })
				if !open {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	s.close()
}

func imageName(image string) string {
	name := image
	if i := strings.LastIndex(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return strings.TrimPrefix(name, "docker.io/")
}

func envOf(c corev1.Container, key, def string) string {
	for _, e := range c.Env {
		if e.Name == key {
			return e.Value
		}
	}
	return def
}

// startServer starts what the image serves on one container port; nil for "nothing listens".
func startServer(image string, pod *corev1.Pod, c corev1.Container, port int32) (*server, error) {
	kind := imageName(image)
	if kind == imageNone {
		return nil, nil
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{l: l}
	switch kind {
	case imageHTTP:
		body := fmt.Sprintf("pod=%s namespace=%s port=%d\n", pod.Name, pod.Namespace, port)
		s.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("X-Pod-Name", pod.Name)
			w.Header().Set("X-Pod-UID", string(pod.UID))
			io.WriteString(w, body)
		})}
		go s.http.Serve(l)
	case imageEcho:
		go s.accept(func(conn net.Conn) { io.Copy(conn, conn) })
	case imageBulk:
		n, err := strconv.ParseInt(envOf(c, "BULK_BYTES", "1048576"), 10, 64)
		if err != nil || n < 0 {
			l.Close()
			return nil, fmt.Errorf("bad BULK_BYTES: %v", err)
		}
		go s.accept(func(conn net.Conn) {
			buf := make([]byte, 64*1024)
			for i := range buf {
				buf[i] = byte('a' + i%26)
			}
			for left := n; left > 0; {
				chunk := int64(len(buf))
				if left < chunk {
					chunk = left
				}
				if _, err := conn.Write(buf[:chunk]); err != nil {
					return
				}
				left -= chunk
			}
		})
	default:
		if err := startApp(kind, s, pod, c); err != nil {
			l.Close()
			if err == errUnknownImage {
				return nil, fmt.Errorf("unknown image %q (the stand-in runs %s, %s, %s, %s, %s, %s, %s, %s, %s, %s): nothing listens", image, imageHTTP, imageEcho, imageBulk, imageNone, imageBanner, imageHalfClose, imageHTTPS, imageGRPC, imageSSH, imageWS)
			}
			return nil, err
		}
	}
	return s, nil
}

func (s *server) accept(handle func(net.Conn)) {
	for {
		conn, err := s.l.Accept()
		if err != nil {
			return
		}
		s.conns.Store(conn, struct{}{})
		go func() {
			defer func() { conn.Close(); s.conns.Delete(conn) }()
			handle(conn)
		}()
	}
}
