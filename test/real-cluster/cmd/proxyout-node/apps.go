package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	corev1 "k8s.io/api/core/v1"
)

// Application-shaped images, for end-to-end protocol tests (docs/real-cluster.md):
//
//	proxyout/banner     server-first, SMTP-like: "220 <pod> ESMTP proxyout\r\n" before the client
//	                    says anything; then per line "QUIT" → "221 bye" and close, "RESULT <id>" →
//	                    "250 <bytes> <sha256>" of what proxyout/halfclose in the same pod read under
//	                    that id, anything else → "250 <line>"
//	proxyout/halfclose  "hello <pod>\n", then closes its write side first (FIN) and reads on: a
//	                    first line <id>, then everything up to the client's FIN, recorded for RESULT
//	proxyout/https      HTTPS (HTTP/1.1 and h2) with the PEM certificate and key in env TLS_CERT and
//	                    TLS_KEY: "pod=<name> proto=<HTTP/x> sni=<server name>\n"
//	proxyout/grpc       gRPC over h2c, service proxyout.Echo (raw bytes, no protobuf): unary Unary
//	                    answers its request; bidi stream Chat answers each message as it comes
//	proxyout/sshd       SSH (sshd.go)
//	proxyout/ws         WebSocket echo on every path (text and binary messages as they came); plain
//	                    requests: /wait?for=<duration> answers "waited <duration>\n" after it,
//	                    /events?n=<count>&every=<duration> streams that many "data: <i>" events,
//	                    /upload answers "<bytes> <sha256>\n" of the request body, /download?bytes=N
//	                    sends N bytes of 'a'..'z' repeated
const (
	imageBanner    = "proxyout/banner"
	imageHalfClose = "proxyout/halfclose"
	imageHTTPS     = "proxyout/https"
	imageGRPC      = "proxyout/grpc"
	imageWS        = "proxyout/ws"
)

// halfCloseResults: "<pod uid>/<id>" → "<bytes> <sha256>".
var halfCloseResults sync.Map

func startApp(kind string, s *server, pod *corev1.Pod, c corev1.Container) error {
	switch kind {
	case imageBanner:
		go s.accept(func(conn net.Conn) { serveBanner(conn, pod) })
	case imageHalfClose:
		go s.accept(func(conn net.Conn) { serveHalfClose(conn, pod) })
	case imageHTTPS:
		cert, err := tls.X509KeyPair([]byte(envOf(c, "TLS_CERT", "")), []byte(envOf(c, "TLS_KEY", "")))
		if err != nil {
			return fmt.Errorf("proxyout/https: TLS_CERT/TLS_KEY: %v", err)
		}
		s.http = &http.Server{
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				fmt.Fprintf(w, "pod=%s proto=%s sni=%s\n", pod.Name, r.Proto, r.TLS.ServerName)
			}),
		}
		go s.http.ServeTLS(s.l, "", "")
	case imageGRPC:
		g := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}))
		g.RegisterService(&echoService, nil)
		s.stop = func(graceful bool) {
			if graceful {
				g.GracefulStop()
			} else {
				g.Stop()
			}
		}
		go g.Serve(s.l)
	case imageSSH:
		return startSSH(s, pod)
	case imageWS:
		up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
		s.http = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !websocket.IsWebSocketUpgrade(r) {
				serveSlow(w, r)
				return
			}
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			for {
				t, msg, err := ws.ReadMessage()
				if err != nil {
					return
				}
				if ws.WriteMessage(t, msg) != nil {
					return
				}
			}
		})}
		go s.http.Serve(s.l)
	default:
		return errUnknownImage
	}
	return nil
}

var errUnknownImage = fmt.Errorf("unknown image")

// serveSlow: an answer after a wait (long polling), or events spread over time (server-sent events).
func serveSlow(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch r.URL.Path {
	case "/wait":
		d, _ := time.ParseDuration(q.Get("for"))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "waited %s\n", d)
	case "/events":
		n, _ := strconv.Atoi(q.Get("n"))
		every, _ := time.ParseDuration(q.Get("every"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := 0; i < n; i++ {
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	case "/upload":
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %s\n", n, hex.EncodeToString(h.Sum(nil)))
	case "/download":
		n, _ := strconv.ParseInt(q.Get("bytes"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 64*1024)
		for i := range buf {
			buf[i] = byte('a' + i%26)
		}
		for n > 0 {
			chunk := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:chunk]); err != nil {
				return
			}
			n -= chunk
		}
	default:
		http.NotFound(w, r)
	}
}

func serveBanner(conn net.Conn, pod *corev1.Pod) {
	fmt.Fprintf(conn, "220 %s ESMTP proxyout\r\n", pod.Name)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.EqualFold(line, "QUIT"):
			io.WriteString(conn, "221 bye\r\n")
			return
		case strings.HasPrefix(line, "RESULT "):
			v, ok := halfCloseResults.Load(string(pod.UID) + "/" + strings.TrimPrefix(line, "RESULT "))
			if !ok {
				io.WriteString(conn, "550 no such result\r\n")
				continue
			}
			fmt.Fprintf(conn, "250 %s\r\n", v)
		default:
			fmt.Fprintf(conn, "250 %s\r\n", line)
		}
	}
}

func serveHalfClose(conn net.Conn, pod *corev1.Pod) {
	fmt.Fprintf(conn, "hello %s\n", pod.Name)
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	r := bufio.NewReader(conn)
	id, err := r.ReadString('\n')
	if err != nil {
		return
	}
	h := sha256.New()
	n, _ := io.Copy(h, r)
	halfCloseResults.Store(string(pod.UID)+"/"+strings.TrimSpace(id), fmt.Sprintf("%d %s", n, hex.EncodeToString(h.Sum(nil))))
}

// rawCodec passes messages as bytes: a gRPC service without generated protobuf code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

var echoService = grpc.ServiceDesc{
	ServiceName: "proxyout.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Unary", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var msg []byte
		if err := dec(&msg); err != nil {
			return nil, err
		}
		return &msg, nil
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Chat", ServerStreams: true, ClientStreams: true, Handler: func(_ any, st grpc.ServerStream) error {
		for {
			var msg []byte
			if err := st.RecvMsg(&msg); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			if err := st.SendMsg(&msg); err != nil {
				return err
			}
		}
	}}},
}
