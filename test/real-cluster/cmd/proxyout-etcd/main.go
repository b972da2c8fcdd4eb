// Command proxyout-etcd runs a single-member embedded etcd on loopback for the test bed.
//
// It listens for clients on 127.0.0.1 at a free port, keeps its data in --data-dir, and
// serves a small control endpoint on loopback: POST /compact compacts the keyspace at the
// current revision (what an etcd operator's periodic compaction does, on demand), so that
// watches resuming from an older resourceVersion get 410 Gone from the API server.
// Once serving, it writes {"clientURL", "controlURL"} as JSON to --ready-file.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "etcd data directory")
	readyFile := flag.String("ready-file", "", "file to write the client and control URLs to once serving")
	clientPort := flag.Int("client-port", 0, "client port (0: a free one)")
	flag.Parse()
	if *dataDir == "" || *readyFile == "" {
		fmt.Fprintln(os.Stderr, "usage: proxyout-etcd --data-dir DIR --ready-file FILE [--client-port N]")
		os.Exit(2)
	}
	if err := run(*dataDir, *readyFile, *clientPort); err != nil {
		fmt.Fprintln(os.Stderr, "proxyout-etcd:", err)
		os.Exit(1)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(dataDir string, clientPort int) (*embed.Etcd, string, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		cp := clientPort
		if cp == 0 {
			p, err := freePort()
			if err != nil {
				return nil, "", err
			}
			cp = p
		}
		pp, err := freePort()
		if err != nil {
			return nil, "", err
		}
		cfg := embed.NewConfig()
		cfg.Name = "proxyout"
		cfg.Dir = dataDir
		cfg.LogLevel = "warn"
		cfg.UnsafeNoFsync = true // a throw-away test store: no need to survive a power cut
		curl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", cp))
		purl, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", pp))
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*curl}, []url.URL{*curl}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*purl}, []url.URL{*purl}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			if clientPort != 0 {
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, curl.String(), nil
		case <-time.After(60 * time.Second):
			e.Close()
			return nil, "", fmt.Errorf("etcd not ready after 60s")
		}
	}
	return nil, "", lastErr
}

func run(dataDir, readyFile string, clientPort int) error {
	e, clientURL, err := start(dataDir, clientPort)
	if err != nil {
		return err
	}
	defer e.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /compact", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		// Any read answers with the store's current revision in its header.
		resp, err := cli.Get(ctx, "compact-probe")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		rev := resp.Header.Revision
		if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int64{"revision": rev})
	})
	mux.HandleFunc("GET /revision", func(w http.ResponseWriter, r *http.Request) {
		resp, err := cli.Get(r.Context(), "compact-probe")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		json.NewEncoder(w).Encode(map[string]int64{"revision": resp.Header.Revision})
	})
	ctl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(ctl, mux)

	ready, _ := json.Marshal(map[string]string{"clientURL": clientURL, "controlURL": "http://" + ctl.Addr().String()})
	tmp := readyFile + ".tmp"
	if err := os.WriteFile(tmp, ready, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, readyFile); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "proxyout-etcd: serving %s, control %s\n", clientURL, ctl.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		fmt.Fprintf(os.Stderr, "proxyout-etcd: %v, stopping\n", s)
	case err := <-e.Err():
		return err
	}
	return nil
}
