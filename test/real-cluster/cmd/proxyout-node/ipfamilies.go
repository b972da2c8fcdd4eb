package main

import (
	"fmt"
	"strings"
)

// podIPFamilies are the families of each pod's IPs, the primary first (--pod-ip-families): the
// default is IPv4 only; "ipv4,ipv6" or "ipv6,ipv4" is a dual-stack cluster, "ipv6" a single-stack
// IPv6 one. Node i's pods get 10.244.i.h and fd00:10:244:i::h (h in hex), the same h in both.
var podIPFamilies = []string{"ipv4"}

func parseIPFamilies(s string) ([]string, error) {
	families := strings.Split(s, ",")
	if len(families) > 2 || (len(families) == 2 && families[0] == families[1]) {
		return nil, fmt.Errorf("--pod-ip-families %q: one family, or both once each", s)
	}
	for _, f := range families {
		if f != "ipv4" && f != "ipv6" {
			return nil, fmt.Errorf("--pod-ip-families %q: ipv4, ipv6, ipv4,ipv6 or ipv6,ipv4", s)
		}
	}
	return families, nil
}

// podIPs is a pod's addresses on node index, host number host, in podIPFamilies' order.
func podIPs(index, host int) []string {
	var ips []string
	for _, f := range podIPFamilies {
		if f == "ipv6" {
			ips = append(ips, fmt.Sprintf("fd00:10:244:%x::%x", index, host))
		} else {
			ips = append(ips, fmt.Sprintf("10.244.%d.%d", index, host))
		}
	}
	return ips
}

// podCIDRs is node index's pod ranges (the Node's spec.podCIDRs), in podIPFamilies' order.
func podCIDRs(index int) []string {
	var cidrs []string
	for _, f := range podIPFamilies {
		if f == "ipv6" {
			cidrs = append(cidrs, fmt.Sprintf("fd00:10:244:%x::/64", index))
		} else {
			cidrs = append(cidrs, fmt.Sprintf("10.244.%d.0/24", index))
		}
	}
	return cidrs
}
