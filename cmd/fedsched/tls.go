package main

// `fedsched tls`: the files of a federation's trust (node/pki): a CA,
// certificates naming a site, user or operator, and gossip keys.

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/pki"
)

func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Create the CA, certificates and gossip key of a federation (see docs/security.md)",
		Long: `Create the files a secure federation needs:

  fedsched tls ca create --dir D                 D/ca.pem, D/ca-key.pem
  fedsched tls cert create --dir D --site NAME   D/site-NAME.pem, D/site-NAME-key.pem
  fedsched tls cert create --dir D --user NAME   D/user-NAME.pem, D/user-NAME-key.pem
  fedsched tls cert create --dir D --operator NAME
  fedsched tls gossip-key --out FILE

A certificate names its identity in a URI SAN (fedsched://site/NAME,
fedsched://user/NAME, fedsched://operator/NAME); the nodes authorize every
call by it. Keys are written with mode 0600; existing files are never
overwritten without --force.`,
	}
	ca := &cobra.Command{Use: "ca", Short: "Certificate authority"}
	ca.AddCommand(newTLSCACreateCmd())
	cert := &cobra.Command{Use: "cert", Short: "Certificates of sites, users and operators"}
	cert.AddCommand(newTLSCertCreateCmd())
	cmd.AddCommand(ca, cert, newTLSGossipKeyCmd())
	return cmd
}

func newTLSCACreateCmd() *cobra.Command {
	var dir, name string
	var force bool
	var days int
	cmd := &cobra.Command{
		Use:   "create --dir D",
		Short: "Write D/ca.pem and D/ca-key.pem: a new certificate authority",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return invalidArg("--dir is required")
			}
			if err := pki.CreateCA(dir, name, pki.Options{Force: force, Lifetime: daysOf(days)}); err != nil {
				return fmt.Errorf("FailedPrecondition: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s/%s and %s/%s (keep the key offline: whoever has it can mint identities)\n", dir, pki.CAFile, dir, pki.CAKeyFile)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory of the CA's files (created 0700 if missing)")
	cmd.Flags().StringVar(&name, "name", "fedsched CA", "the CA's common name")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite existing files")
	cmd.Flags().IntVar(&days, "days", 0, "lifetime in days (default 5 years)")
	return cmd
}

func newTLSCertCreateCmd() *cobra.Command {
	var dir, site, usr, op string
	var hosts []string
	var force bool
	var days int
	cmd := &cobra.Command{
		Use:   "create --dir D (--site NAME | --user NAME | --operator NAME)",
		Short: "Write a certificate and key for a site, user or operator, signed by the CA in D",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				return invalidArg("--dir is required")
			}
			var kinds []auth.Kind
			var name string
			for k, v := range map[auth.Kind]string{auth.Site: site, auth.User: usr, auth.Operator: op} {
				if v != "" {
					kinds, name = append(kinds, k), v
				}
			}
			if len(kinds) != 1 {
				return invalidArg("give exactly one of --site, --user and --operator")
			}
			if err := auth.CheckName(name); err != nil {
				return invalidArg("%v", err)
			}
			if err := pki.CreateCert(dir, kinds[0], name, pki.Options{Force: force, Hosts: hosts, Lifetime: daysOf(days)}); err != nil {
				return fmt.Errorf("FailedPrecondition: %w", err)
			}
			cert, key := pki.CertFiles(dir, kinds[0], name)
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s (%s)\n", cert, key, auth.URI(kinds[0], name))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", "", "directory of the CA (ca.pem, ca-key.pem); the certificate is written there")
	fl.StringVar(&site, "site", "", "a site's certificate (serves its API and dials its peers)")
	fl.StringVar(&usr, "user", "", "a user's certificate (submits and manages its own jobs)")
	fl.StringVar(&op, "operator", "", "an operator's certificate (may do everything, reservations included)")
	fl.StringSliceVar(&hosts, "host", nil, "extra DNS names or IP addresses of a site certificate (for tools that check host names)")
	fl.BoolVar(&force, "force", false, "overwrite existing files")
	fl.IntVar(&days, "days", 0, "lifetime in days (default 365 for sites, 90 for users and operators)")
	return cmd
}

func newTLSGossipKeyCmd() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "gossip-key --out FILE",
		Short: "Write a new random gossip encryption key (AES-256, base64) to FILE, mode 0600",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return invalidArg("--out is required")
			}
			if err := pki.WriteGossipKey(out, force); err != nil {
				return fmt.Errorf("FailedPrecondition: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (give it to every site: --gossip-key %s)\n", out, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing file")
	return cmd
}

func daysOf(d int) time.Duration { return time.Duration(d) * 24 * time.Hour }
