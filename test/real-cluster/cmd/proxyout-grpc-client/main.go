// proxyout-grpc-client calls proxyout/grpc's service proxyout.Echo (test/real-cluster, apps.go)
// through a proxy, as a gRPC app would: over h2c, dialled through SOCKS5 with the name unresolved
// (--socks) or through HTTP CONNECT (--http-proxy, grpc-go's own proxy dialer, as HTTPS_PROXY gives
// it). It makes --unary calls, then opens --streams bidirectional Chat streams at once on the one
// connection, each sending --messages messages of --size bytes and checking every answer. It
// prints "ok" and its figures, or the first error (exit 1).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	"golang.org/x/net/proxy"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
)

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*(v.(*[]byte)))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

func main() {
	target := flag.String("target", "", "host:port of the gRPC server, as the proxy should see it")
	socks := flag.String("socks", "", "SOCKS5 proxy host:port (the name is resolved by the proxy)")
	httpProxy := flag.String("http-proxy", "", "HTTP proxy URL (CONNECT)")
	unary := flag.Int("unary", 10, "unary calls")
	streams := flag.Int("streams", 8, "bidirectional streams at once")
	messages := flag.Int("messages", 50, "messages per stream")
	size := flag.Int("size", 16*1024, "bytes per message")
	pause := flag.Duration("pause", 0, "idle time between the unary calls and the streams")
	timeout := flag.Duration("timeout", 60*time.Second, "the whole run")
	flag.Parse()
	if err := run(*target, *socks, *httpProxy, *unary, *streams, *messages, *size, *pause, *timeout); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run(target, socks, httpProxy string, unary, streams, messages, size int, pause, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{}))}
	switch {
	case socks != "":
		d, err := proxy.SOCKS5("tcp", socks, nil, proxy.Direct)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.(proxy.ContextDialer).DialContext(ctx, "tcp", addr)
		}))
	case httpProxy != "":
		u, err := url.Parse(httpProxy)
		if err != nil {
			return err
		}
		// grpc-go reads the proxy from the environment (http.ProxyFromEnvironment) and CONNECTs.
		os.Setenv("HTTPS_PROXY", u.String())
		os.Setenv("NO_PROXY", "")
	default:
		return errors.New("--socks or --http-proxy")
	}
	conn, err := grpc.NewClient("passthrough:///"+target, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
	for i := 0; i < unary; i++ {
		req := []byte(fmt.Sprintf("unary %d", i))
		var resp []byte
		if err := conn.Invoke(ctx, "/proxyout.Echo/Unary", &req, &resp); err != nil {
			return fmt.Errorf("unary %d: %w", i, err)
		}
		if !bytes.Equal(req, resp) {
			return fmt.Errorf("unary %d: answer %q", i, resp)
		}
	}
	time.Sleep(pause)
	desc := &grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for s := 0; s < streams; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			st, err := conn.NewStream(ctx, desc, "/proxyout.Echo/Chat")
			if err != nil {
				errs <- fmt.Errorf("stream %d: %w", s, err)
				return
			}
			for m := 0; m < messages; m++ {
				msg := make([]byte, size)
				rand.Read(msg)
				if err := st.SendMsg(&msg); err != nil {
					errs <- fmt.Errorf("stream %d send %d: %w", s, m, err)
					return
				}
				var got []byte
				if err := st.RecvMsg(&got); err != nil {
					errs <- fmt.Errorf("stream %d recv %d: %w", s, m, err)
					return
				}
				if !bytes.Equal(msg, got) {
					errs <- fmt.Errorf("stream %d message %d differs", s, m)
					return
				}
			}
			if err := st.CloseSend(); err != nil {
				errs <- fmt.Errorf("stream %d close: %w", s, err)
				return
			}
			var extra []byte
			if err := st.RecvMsg(&extra); err != io.EOF {
				errs <- fmt.Errorf("stream %d end: %v", s, err)
			}
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	fmt.Printf("ok unary=%d streams=%d messages=%d size=%d in %s\n", unary, streams, messages, size, time.Since(start).Round(time.Millisecond))
	return nil
}
