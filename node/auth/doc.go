// Package auth says who is calling a site and whether they may: the
// identities of the federation (sites, users, operators) as certificates
// and the kernel name them, and the one place where every RPC of a node is
// authorized (Interceptor and its policy table, policy.go).
//
// An identity comes from the transport, never from a request field:
//   - mutual TLS: the URI SAN of the client certificate, fedsched://site/NAME,
//     fedsched://user/NAME or fedsched://operator/NAME, in a certificate that
//     chains to the site's CA (the TLS handshake checked that);
//   - the node's Unix socket: the caller's uid from the kernel (SO_PEERCRED);
//     root and the node's own uid are operators, every other uid is the user
//     of that name;
//   - plaintext TCP, which a node only serves with --insecure on loopback:
//     the caller is trusted as it claims (development and tests).
package auth
