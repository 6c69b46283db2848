package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Kind is what an identity may act as.
type Kind int

const (
	// Anonymous: no identity could be established (a TLS connection
	// without a fedsched identity in its certificate).
	Anonymous Kind = iota
	// Site: a site of the federation (its node), for FederationService.
	Site
	// User: a person or service submitting jobs; acts on its own jobs.
	User
	// Operator: runs the site; may do everything.
	Operator
	// Insecure: a caller on plaintext TCP, which only --insecure serves:
	// trusted as it claims, site and operator alike.
	Insecure
)

var kindNames = [...]string{Anonymous: "anonymous", Site: "site", User: "user", Operator: "operator", Insecure: "insecure"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKind parses "site", "user" or "operator".
func ParseKind(s string) (Kind, error) {
	switch s {
	case "site":
		return Site, nil
	case "user":
		return User, nil
	case "operator":
		return Operator, nil
	}
	return Anonymous, fmt.Errorf("identity kind %q: want site, user or operator", s)
}

// Identity is who a caller is.
type Identity struct {
	Kind Kind
	// Name is the site's or the user's name; for Insecure callers, the
	// name they claim (may be empty).
	Name string
	// UID is the caller's Unix uid when it came over the node's socket,
	// -1 otherwise.
	UID int
	// Via says how the identity was established: "tls", "unix" or
	// "plaintext".
	Via string
}

// String renders the identity for refusals and logs, e.g. "user alice (tls)".
func (id Identity) String() string {
	s := id.Kind.String()
	if id.Name != "" {
		s += " " + id.Name
	}
	if id.UID >= 0 && id.Via == ViaUnix {
		s += fmt.Sprintf(" (uid %d on the local socket)", id.UID)
	} else if id.Via != "" {
		s += " (" + id.Via + ")"
	}
	return s
}

// How identities are established.
const (
	ViaTLS       = "tls"
	ViaUnix      = "unix"
	ViaPlaintext = "plaintext"
)

// URIScheme is the scheme of identity URIs in certificates.
const URIScheme = "fedsched"

// URI returns the identity URI of a kind and name: fedsched://site/NAME.
func URI(k Kind, name string) *url.URL {
	return &url.URL{Scheme: URIScheme, Host: k.String(), Path: "/" + name}
}

// ErrNoIdentity is returned by FromCertificate for a certificate without a
// fedsched identity URI.
var ErrNoIdentity = errors.New("certificate carries no fedsched identity")

// FromCertificate returns the identity a (verified) certificate names in
// its URI SAN. A certificate naming two identities is refused: which one
// would count is not obvious.
func FromCertificate(c *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range c.URIs {
		if u.Scheme != URIScheme {
			continue
		}
		k, err := ParseKind(u.Host)
		if err != nil {
			return Identity{}, fmt.Errorf("certificate %q: %w", c.Subject.CommonName, err)
		}
		name := strings.TrimPrefix(u.Path, "/")
		if err := CheckName(name); err != nil {
			return Identity{}, fmt.Errorf("certificate %q: %w", c.Subject.CommonName, err)
		}
		found = append(found, Identity{Kind: k, Name: name, UID: -1, Via: ViaTLS})
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("certificate %q: %w", c.Subject.CommonName, ErrNoIdentity)
	case 1:
		return found[0], nil
	}
	return Identity{}, fmt.Errorf("certificate %q names %d fedsched identities; want one", c.Subject.CommonName, len(found))
}

// CheckName checks a site or user name: 1 to 63 letters, digits, '.', '-'
// or '_', starting with a letter or digit (the rule of site names, which
// also makes a safe file name).
func CheckName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("name %q: want 1 to 63 characters", s)
	}
	for i, r := range s {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '.' && r != '-' && r != '_') {
			return fmt.Errorf("name %q: want letters, digits, '.', '-' or '_', starting with a letter or digit", s)
		}
	}
	return nil
}
