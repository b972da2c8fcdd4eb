// Command proxyout-node stands in for the kubelet of one or more Nodes in the test bed.
//
// For each node it registers a Node (InternalIP 127.0.0.1, its own TLS port as the kubelet
// endpoint, Ready), watches the pods bound to it, runs every declared container port as a
// local server on 127.0.0.1 (what it serves is chosen by the container image, see servers.go),
// reports the pod Running with a pod IP from 10.244.<node>.0/24 (and fd00:10:244:<node>::/64 with
// --pod-ip-families, see ipfamilies.go; never dialled: the API server reaches pods only through
// the node), and serves the kubelet's /portForward/{namespace}/{pod} with the upstream CRI
// streaming port-forward server, whose PortForwarder dials the pod's local server. Deleted pods have their servers stopped and are then removed with grace period 0.
//
// Readiness can be driven from a test: the annotation proxyout.test/ready: "false" keeps or
// turns the pod's Ready condition false (its servers keep running).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	translator "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

const (
	readyAnnotation     = "proxyout.test/ready"
	goneAnnotation      = "proxyout.test/kubelet-gone"
	hangAnnotation      = "proxyout.test/kubelet-hang"
	dialDelayAnnotation = "proxyout.test/dial-delay"
)

var (
	websocketTunnel = true
	// maxPods is each Node's pod capacity (the kubelet's --max-pods, default 110); a node's pod
	// IPs come from its /24, so at most 253.
	maxPods = 110
	// streamIdleTimeout: the kubelet's --streaming-connection-idle-timeout (default 4h; hardened
	// clusters set minutes).
	streamIdleTimeout time.Duration
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	nodeNames := flag.String("nodes", "node-1", "comma-separated names of the nodes to stand in for")
	certFile := flag.String("tls-cert-file", "", "serving certificate (SAN 127.0.0.1)")
	keyFile := flag.String("tls-private-key-file", "", "serving key")
	clientCA := flag.String("client-ca-file", "", "CA that signs the API server's kubelet client certificate")
	readyFile := flag.String("ready-file", "", "file to write {node: port} as JSON to once every node is registered")
	flag.DurationVar(&streamIdleTimeout, "streaming-connection-idle-timeout", streaming.DefaultConfig.StreamIdleTimeout,
		"the kubelet's flag: a port-forward connection with no frames this long is closed")
	flag.BoolVar(&websocketTunnel, "websocket-tunnel", true,
		"tunnel SPDY in a WebSocket as the kubelet does with ExtendWebSocketsToKubelet (default on since 1.36); off: as an older kubelet, such a request goes to the v4 WebSocket handler")
	flag.IntVar(&maxPods, "max-pods", 110, "pods per node (the Node's pods capacity, as the kubelet's --max-pods); at most 253, the addresses of its /24")
	qps := flag.Float64("kube-api-qps", 100, "client QPS towards the API server (all nodes share one client)")
	burst := flag.Int("kube-api-burst", 200, "client burst towards the API server")
	families := flag.String("pod-ip-families", "ipv4", "pod IP families, the primary first: ipv4, ipv6, ipv4,ipv6 or ipv6,ipv4 (see ipfamilies.go)")
	portList := flag.String("ports", "", "comma-separated TLS ports of the nodes, in --nodes order (default: any free one each); a restarted kubelet listens where it did")
	flag.Parse()
	var err error
	if podIPFamilies, err = parseIPFamilies(*families); err != nil {
		fmt.Fprintln(os.Stderr, "proxyout-node:", err)
		os.Exit(2)
	}
	if maxPods < 1 || maxPods > maxPodIPs {
		fmt.Fprintf(os.Stderr, "proxyout-node: --max-pods must be 1..%d (a node's pod IPs are its /24)\n", maxPodIPs)
		os.Exit(2)
	}
	if *kubeconfig == "" || *certFile == "" || *keyFile == "" || *clientCA == "" {
		fmt.Fprintln(os.Stderr, "usage: proxyout-node --kubeconfig F --tls-cert-file F --tls-private-key-file F --client-ca-file F [--nodes a,b] [--ready-file F]")
		os.Exit(2)
	}
	names := strings.Split(*nodeNames, ",")
	ports := make([]int, len(names))
	if *portList != "" {
		for i, s := range strings.Split(*portList, ",") {
			if i >= len(ports) {
				break
			}
			fmt.Sscan(s, &ports[i])
		}
	}
	if err := run(*kubeconfig, names, ports, *certFile, *keyFile, *clientCA, *readyFile, float32(*qps), *burst); err != nil {
		fmt.Fprintln(os.Stderr, "proxyout-node:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, names []string, listenPorts []int, certFile, keyFile, clientCAFile, readyFile string, qps float32, burst int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.UserAgent = "proxyout-node"
	cfg.QPS, cfg.Burst = qps, burst
	if len(names) > 254 {
		return fmt.Errorf("%d nodes: at most 254 (node i gets 10.244.i.0/24)", len(names))
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(clientCAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s", clientCAFile)
	}
	tlsConfig := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"http/1.1"},
	}

	ports := map[string]int{}
	var nodes []*node
	for i, name := range names {
		n := &node{name: name, index: i + 1, client: client, pods: map[types.UID]*podRuntime{}, ips: map[int]bool{}}
		sl, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		cfg := streaming.DefaultConfig
		cfg.StreamIdleTimeout = streamIdleTimeout
		cfg.Addr = sl.Addr().String()
		cfg.BaseURL = &url.URL{Scheme: "http", Host: cfg.Addr}
		n.streaming, err = streaming.NewServer(cfg, runtime{node: n})
		if err != nil {
			return err
		}
		go http.Serve(sl, n.streaming)
		l, err := tls.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", listenPorts[i]), tlsConfig)
		if err != nil {
			return err
		}
		n.port = l.Addr().(*net.TCPAddr).Port
		srv := &http.Server{Handler: n.handler(), ReadHeaderTimeout: 30 * time.Second}
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintf(os.Stderr, "proxyout-node: %s: serve: %v\n", name, err)
				os.Exit(1)
			}
		}()
		if err := n.register(ctx); err != nil {
			return fmt.Errorf("register node %s: %w", name, err)
		}
		ports[name] = n.port
		nodes = append(nodes, n)
	}
	for _, n := range nodes {
		if err := n.watchPods(ctx); err != nil {
			return err
		}
		go n.heartbeat(ctx)
	}
	if readyFile != "" {
		data, _ := json.Marshal(ports)
		if err := os.WriteFile(readyFile+".tmp", data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(readyFile+".tmp", readyFile); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "proxyout-node: serving %v\n", ports)
	<-ctx.Done()
	for _, n := range nodes {
		n.stopAll()
	}
	return nil
}

type node struct {
	name   string
	index  int
	port   int
	client kubernetes.Interface

	mu     sync.Mutex
	pods   map[types.UID]*podRuntime
	ips    map[int]bool // host numbers of 10.244.<index>.0/24 in use
	nextIP int          // the search for a free host number starts at 2+nextIP

	streaming streaming.Server // the runtime's streaming server (plain HTTP on loopback, as containerd's default)
}

// podRuntime is one pod's "containers": a server per declared container port.
type podRuntime struct {
	namespace, name string
	uid             types.UID
	host            int      // the host number of its addresses
	ips             []string // its pod IPs, the primary first
	started         metav1.Time
	servers         map[int32]*server // container port -> local server
	ready           bool              // last readiness reported
	containersReady bool              // last ContainersReady reported
	reported        bool
	deleting        bool
	dialDelay       time.Duration // proxyout.test/dial-delay: the runtime waits this long before dialling the pod's port
	gone            bool          // proxyout.test/kubelet-gone: "true": /portForward answers 404 as for a pod the kubelet no longer has
	hung            bool          // proxyout.test/kubelet-hang: "true": /portForward never answers, as a kubelet that hangs or a node cut off
}

func (n *node) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/portForward/{namespace}/{pod}", n.servePortForward)
	mux.HandleFunc("/portForward/{namespace}/{pod}/{uid}", n.servePortForward)
	return mux
}

// servePortForward does what the kubelet's handler does: look the pod up, read the V4 options,
// ask the runtime's streaming server for a port-forward URL, and proxy the request there with
// the upgrade-aware proxy — through the WebSocket-to-SPDY tunnelling handler when the client asks
// for that tunnel (the kubelet's ExtendWebSocketsToKubelet).
func (n *node) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, podName, uid := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid")
	tunnel := websocketTunnel && wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
	opts := &portforward.V4Options{}
	if !tunnel {
		o, err := portforward.NewV4Options(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		opts = o
	}
	p := n.findPod(ns, podName)
	if p == nil || p.gone {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return
	}
	if uid != "" && types.UID(uid) != p.uid {
		http.Error(w, "pod not found", http.StatusNotFound)
		return
	}
	if p.hung {
		<-r.Context().Done()
		return
	}
	resp, err := n.streaming.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: p.sandboxID(), Port: opts.Ports})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	target, err := url.Parse(resp.Url)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var h http.Handler = proxy.NewUpgradeAwareHandler(target, nil, false, true, responder{})
	if tunnel {
		h = translator.NewTunnelingHandler(h)
	}
	h.ServeHTTP(w, r)
}

// responder answers a failed proxying as the kubelet's does.
type responder struct{}

func (responder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	fmt.Fprintf(os.Stderr, "proxyout-node: error while proxying request: %v\n", err)
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func (n *node) findPod(ns, name string) *podRuntime {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.pods {
		if p.namespace == ns && p.name == name {
			return p
		}
	}
	return nil
}

func (n *node) findSandbox(id string) *podRuntime {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.pods {
		if p.sandboxID() == id {
			return p
		}
	}
	return nil
}

// sandboxID is what containerd names a pod's sandbox by: 64 hex digits.
func (p *podRuntime) sandboxID() string {
	sum := sha256.Sum256([]byte(p.uid))
	return hex.EncodeToString(sum[:])
}

// runtime is the node's "container runtime" behind the CRI streaming server (which serves the
// port-forward protocols, as in containerd and CRI-O); only port-forward is implemented.
type runtime struct{ node *node }

func (runtime) Exec(context.Context, string, []string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommandserver.TerminalSize) error {
	return errors.New("exec is not supported by the proxyout node stand-in")
}

func (runtime) Attach(context.Context, string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommandserver.TerminalSize) error {
	return errors.New("attach is not supported by the proxyout node stand-in")
}

// PortForward dials the pod's server for the port, as containerd dials localhost:port in the
// pod's network namespace, and returns that dial's error (in containerd's words) when nothing
// listens there.
func (rt runtime) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	if port <= 0 || port > 65535 {
		return fmt.Errorf("invalid port %d", port)
	}
	defer stream.Close()
	p := rt.node.findSandbox(sandboxID)
	if p == nil {
		return fmt.Errorf("failed to find sandbox %q in store: not found", sandboxID)
	}
	netns := "/var/run/netns/cni-" + sandboxID[:8] + "-" + sandboxID[8:12] + "-" + sandboxID[12:16] + "-" + sandboxID[16:20] + "-" + sandboxID[20:32]
	rt.node.mu.Lock()
	var addr string
	if s := p.servers[port]; s != nil {
		addr = s.addr()
	}
	dialDelay := p.dialDelay
	rt.node.mu.Unlock()
	if dialDelay > 0 {
		// A slow runtime or network namespace: the answer (data or refusal) comes this much later.
		select {
		case <-time.After(dialDelay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if addr == "" {
		// Nothing listens on that port in the pod: the dial inside the pod's namespace is refused.
		refused := func(network, ip string) error {
			return &net.OpError{Op: "dial", Net: network, Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: int(port)},
				Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		return fmt.Errorf("failed to execute portforward in network namespace %q: failed to connect to localhost:%d inside namespace %q, IPv4: %v IPv6 %v ",
			netns, port, sandboxID, refused("tcp4", "127.0.0.1"), refused("tcp6", "::1"))
	}
	conn, err := net.DialTimeout("tcp4", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("failed to execute portforward in network namespace %q: failed to connect to localhost:%d inside namespace %q: %w", netns, port, sandboxID, err)
	}
	defer conn.Close()
	errCh := make(chan error, 2)
	go func() { _, err := io.Copy(stream, conn); errCh <- err }()
	go func() { _, err := io.Copy(conn, stream); errCh <- err }()
	var first error
	select {
	case first = <-errCh:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Like containerd: give the other direction a second to finish after the first one ends.
	select {
	case err := <-errCh:
		if first == nil {
			first = err
		}
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	return first
}

func (n *node) register(ctx context.Context) error {
	nodeObj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.name,
			Labels: map[string]string{
				"kubernetes.io/hostname": n.name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"proxyout.test/node":     "stand-in",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: podCIDRs(n.index)[0], PodCIDRs: podCIDRs(n.index)},
	}
	_, err := n.client.CoreV1().Nodes().Create(ctx, nodeObj, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The node lifecycle controller may write the Node between our read and our write (with
	// dozens of nodes it does): read again and retry, as the kubelet does.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return n.updateStatus(ctx) })
}

func (n *node) updateStatus(ctx context.Context) error {
	cur, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	cur.Status.Capacity = capacity
	cur.Status.Allocatable = capacity
	cur.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
		{Type: corev1.NodeHostName, Address: n.name},
	}
	cur.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(n.port)
	cur.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64",
		ContainerRuntimeVersion: "proxyout://stand-in", OSImage: "proxyout node stand-in",
	}
	transition := now
	for _, c := range cur.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			transition = c.LastTransitionTime
		}
	}
	cur.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "proxyout stand-in is posting ready status",
			LastHeartbeatTime: now, LastTransitionTime: transition},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: transition},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: transition},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: transition},
	}
	_, err = n.client.CoreV1().Nodes().UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the node's Lease every 10 s and re-posts its status every 20 s (re-registering
// the node if it was deleted), as the kubelet does, so that the node lifecycle controller takes
// the node for alive: it lifts the not-ready taint and keeps its pods.
func (n *node) heartbeat(ctx context.Context) {
	n.renewLease(ctx)
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	failed := false
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ok := n.renewLease(ctx)
			if ok && failed {
				go n.recheckPods(ctx)
			}
			failed = !ok
			if i%2 == 0 {
				if err := n.register(ctx); err != nil && ctx.Err() == nil {
					fmt.Fprintf(os.Stderr, "proxyout-node: %s: status: %v\n", n.name, err)
				}
			}
		}
	}
}

// recheckPods reads this node's pods from the API four times, 10 s apart, after the API server was
// unreachable, and posts a status wherever the API's is not ours. The node lifecycle controller
// marks a node's pods not ready once its lease is stale; the kubelet's status manager compares
// its pods with the API every 10 s and puts that right, while the pod informer here may still be
// backing off (up to a minute) from the outage.
func (n *node) recheckPods(ctx context.Context) {
	for i := 0; i < 4; i++ {
		list, err := n.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String()})
		if err == nil {
			for j := range list.Items {
				n.sync(ctx, &list.Items[j])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// renewLease renews (or creates) the node's Lease; false when the API server could not be told.
func (n *node) renewLease(ctx context.Context) bool {
	leases := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	duration := int32(40)
	lease, err := leases.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, nerr := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if nerr != nil {
			err = nerr
		} else {
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: corev1.NamespaceNodeLease,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &n.name, LeaseDurationSeconds: &duration, RenewTime: &now},
			}, metav1.CreateOptions{})
		}
	} else if err == nil {
		lease.Spec.RenewTime = &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "proxyout-node: %s: lease: %v\n", n.name, err)
	}
	return err == nil
}

func (n *node) watchPods(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.name).String()
		}))
	inf := factory.Core().V1().Pods().Informer()
	queue := make(chan *corev1.Pod, 1024)
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { queue <- obj.(*corev1.Pod) },
		UpdateFunc: func(_, obj any) { queue <- obj.(*corev1.Pod) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				n.forget(p.UID)
			}
		},
	})
	if err != nil {
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case p := <-queue:
				go n.sync(ctx, p)
			}
		}
	}()
	factory.Start(ctx.Done())
	return nil
}

func (n *node) forget(uid types.UID) {
	n.mu.Lock()
	p := n.pods[uid]
	delete(n.pods, uid)
	if p != nil {
		delete(n.ips, p.host)
	}
	n.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

func (n *node) stopAll() {
	n.mu.Lock()
	pods := n.pods
	n.pods = map[types.UID]*podRuntime{}
	n.mu.Unlock()
	for _, p := range pods {
		p.stop()
	}
}

func (p *podRuntime) stop() {
	for _, s := range p.servers {
		s.close()
	}
}

const stopDelayAnnotation = "proxyout.test/stop-delay"

// terminate stops a deleted pod's containers as the kubelet and a well-behaved app would: the
// servers keep serving for the pod's proxyout.test/stop-delay (a Go duration, default 0: a
// preStop sleep), then stop accepting and finish what is in flight, within the pod's grace
// period. Port-forwarding to the pod works until then (a terminating pod still runs).
func (p *podRuntime) terminate(pod *corev1.Pod) {
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	deadline := time.Now().Add(grace)
	if d, err := time.ParseDuration(pod.Annotations[stopDelayAnnotation]); err == nil && d > 0 {
		time.Sleep(min(d, grace))
	}
	var wg sync.WaitGroup
	for _, s := range p.servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.shutdown(time.Until(deadline)) }()
	}
	wg.Wait()
}

// sync brings one pod's local state and reported status in line with its spec.
func (n *node) sync(ctx context.Context, pod *corev1.Pod) {
	if pod.DeletionTimestamp != nil {
		n.mu.Lock()
		p := n.pods[pod.UID]
		if p != nil {
			if p.deleting {
				n.mu.Unlock()
				return
			}
			p.deleting = true
		}
		n.mu.Unlock()
		if p != nil {
			p.terminate(pod)
		}
		zero := int64(0)
		uid := pod.UID
		err := n.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "proxyout-node: delete %s/%s: %v\n", pod.Namespace, pod.Name, err)
		}
		n.forget(pod.UID)
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	n.mu.Lock()
	p := n.pods[pod.UID]
	if p == nil {
		// A restarted kubelet finds the pod's sandbox still running: it keeps its address.
		host := n.adoptIP(pod.Status.PodIP)
		if host == 0 {
			host = n.allocateIP()
		}
		if host == 0 {
			n.mu.Unlock()
			// As a kubelet whose CNI has no address left: the pod stays Pending.
			fmt.Fprintf(os.Stderr, "proxyout-node: %s/%s: no pod IP left in 10.244.%d.0/24\n", pod.Namespace, pod.Name, n.index)
			return
		}
		p = &podRuntime{
			namespace: pod.Namespace, name: pod.Name, uid: pod.UID, host: host,
			ips:     podIPs(n.index, host),
			started: metav1.Now(),
			servers: map[int32]*server{},
		}
		n.pods[pod.UID] = p
		// Native sidecars (init containers with restartPolicy Always) run beside the containers,
		// their ports served in the pod's network namespace as the containers' are.
		containers := append([]corev1.Container{}, pod.Spec.Containers...)
		for _, c := range pod.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				containers = append(containers, c)
			}
		}
		for _, c := range containers {
			for _, cp := range c.Ports {
				if cp.Protocol != "" && cp.Protocol != corev1.ProtocolTCP {
					continue
				}
				s, err := startServer(c.Image, pod, c, cp.ContainerPort)
				if err != nil {
					fmt.Fprintf(os.Stderr, "proxyout-node: %s/%s: container %s port %d: %v\n", pod.Namespace, pod.Name, c.Name, cp.ContainerPort, err)
					continue
				}
				if s != nil {
					p.servers[cp.ContainerPort] = s
				}
			}
		}
	}
	// As the kubelet: the pod is Ready once its containers are and every readiness gate's
	// condition (written by another controller) is True.
	containersReady := pod.Annotations[readyAnnotation] != "false"
	ready := containersReady && readinessGatesTrue(pod)
	p.gone = pod.Annotations[goneAnnotation] == "true"
	p.hung = pod.Annotations[hangAnnotation] == "true"
	p.dialDelay, _ = time.ParseDuration(pod.Annotations[dialDelayAnnotation])
	// The node lifecycle controller marks pods not ready while the node's lease is stale (an API
	// outage of more than the grace period): like the kubelet's status manager, post again when the
	// API's status is not ours.
	if p.reported && p.ready == ready && p.containersReady == containersReady && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP == p.ips[0] && podReady(pod) == ready {
		n.mu.Unlock()
		return
	}
	p.ready, p.containersReady, p.reported = ready, containersReady, true
	ips, started := p.ips, p.started
	n.mu.Unlock()

	if err := n.postStatus(ctx, pod, ips, started, containersReady, ready); err != nil && ctx.Err() == nil {
		if !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "proxyout-node: status %s/%s: %v\n", pod.Namespace, pod.Name, err)
		}
		n.mu.Lock()
		p.reported = false
		n.mu.Unlock()
		if apierrors.IsConflict(err) {
			if fresh, gerr := n.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); gerr == nil && fresh.UID == pod.UID {
				n.sync(ctx, fresh)
			}
		}
	}
}

// podReady is the pod's Ready condition as the API has it.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// maxPodIPs is how many pod IPs a node's /24 gives: .2 to .254 (.1 is the bridge's, as with
// the bridge CNI plugin).
const maxPodIPs = 253

// allocateIP takes the next free host number after the one given last, as host-local IPAM
// does (a freed address is not handed out again at once); 0 when all are in use. n.mu is held.
func (n *node) allocateIP() int {
	for i := 0; i < maxPodIPs; i++ {
		host := 2 + (n.nextIP+i)%maxPodIPs
		if !n.ips[host] {
			n.ips[host], n.nextIP = true, (host-1)%maxPodIPs
			return host
		}
	}
	return 0
}

// adoptIP takes the host number of ip when it is this node's and free (a pod that ran before the
// stand-in restarted); 0 otherwise. n.mu is held.
func (n *node) adoptIP(ip string) int {
	for host := 2; host < 2+maxPodIPs && ip != ""; host++ {
		if podIPs(n.index, host)[0] == ip && !n.ips[host] {
			n.ips[host] = true
			return host
		}
	}
	return 0
}

// readinessGatesTrue: every condition the pod's readiness gates name is there and True.
func readinessGatesTrue(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.ReadinessGates {
		ok := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (n *node) postStatus(ctx context.Context, pod *corev1.Pod, ips []string, started metav1.Time, containersReady, ready bool) error {
	pod = pod.DeepCopy()
	now := metav1.Now()
	status := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	readyStatus, containersStatus := status(ready), status(containersReady)
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		for _, c := range pod.Status.Conditions {
			if c.Type == t && c.Status == s {
				return c
			}
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIP = "127.0.0.1"
	pod.Status.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	pod.Status.PodIP = ips[0]
	pod.Status.PodIPs = nil
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	pod.Status.StartTime = &started
	conditions := []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, corev1.ConditionTrue),
		cond(corev1.PodInitialized, corev1.ConditionTrue),
		cond(corev1.PodReady, readyStatus),
		cond(corev1.ContainersReady, containersStatus),
		cond(corev1.PodScheduled, corev1.ConditionTrue),
	}
	// The readiness gates' conditions belong to the controllers that write them: kept as they are.
	for _, g := range pod.Spec.ReadinessGates {
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType {
				conditions = append(conditions, c)
			}
		}
	}
	pod.Status.Conditions = conditions
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     "proxyout://" + c.Image,
			ContainerID: "proxyout://" + string(pod.UID) + "/" + c.Name,
			Ready:       containersReady,
			Started:     &[]bool{true}[0],
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
	_, err := n.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}
