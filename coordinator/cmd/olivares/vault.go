package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// grantFlag collects --grant KIND:SECRET:ENV[:file] (R-GRANT-1); SECRET is
// a ref or a name, resolved before the launch.
type grantFlag []apitypes.Grant

func (g *grantFlag) String() string { return fmt.Sprint(len(*g)) }

func (g *grantFlag) Set(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 || (len(parts) == 4 && parts[3] != "file") {
		return errors.New("want KIND:SECRET:ENV or KIND:SECRET:ENV:file (SECRET: a vault secret's ref or name)")
	}
	*g = append(*g, apitypes.Grant{Kind: parts[0], SecretRef: parts[1], Env: parts[2], AsFile: len(parts) == 4})
	return nil
}

// The vault commands. A value is read from a file or standard input, never
// from the command line, where other users could see it.
func vaultCommands() []*command {
	var valueFile string
	return []*command{{
		name: "vault add", arg: "secret name",
		usage: "olivares vault add NAME --value-file FILE|-   store a secret (admin); never on the command line\n",
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&valueFile, "value-file", "", "file holding the value, or - for standard input")
		},
		check: func(c *call) error { return c.required("value-file") },
		run: func(ctx context.Context, c *call) error {
			raw, err := readInput(valueFile, c.in, maxSecretRead)
			if err != nil {
				return fmt.Errorf("vault add: reading the value: %w", err)
			}
			v := strings.TrimSuffix(string(raw), "\n")
			sec, err := c.cl.CreateSecret(ctx, c.arg, v)
			if err != nil {
				return err
			}
			return c.emit(sec, func() { fmt.Fprintf(c.out, "secret %s (%s) stored\n", sec.Ref, sec.Name) })
		},
	}, {
		name: "vault list", usage: "olivares vault list [--json]\n",
		run: func(ctx context.Context, c *call) error {
			l, err := c.cl.Secrets(ctx)
			if err != nil {
				return err
			}
			return c.emit(l, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SECRET\tNAME\tCREATED")
				for _, s := range l.Items {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Ref, s.Name, stamp(s.CreatedAt))
				}
				tw.Flush()
			})
		},
	}, {
		name: "vault delete", arg: "secret ref or name", usage: "olivares vault delete REF|NAME [--json]\n",
		run: func(ctx context.Context, c *call) error {
			ref, err := resolveSecret(ctx, c, c.arg)
			if err != nil {
				return err
			}
			if err := c.cl.DeleteSecret(ctx, ref); err != nil {
				return err
			}
			return c.emit(map[string]any{"ref": ref, "deleted": true}, func() { fmt.Fprintf(c.out, "%s deleted\n", ref) })
		},
	}}
}

// resolveSecret is resolveProfile for vault secrets.
func resolveSecret(ctx context.Context, c *call, v string) (string, error) {
	if strings.HasPrefix(v, secretRefPrefix) {
		return v, nil
	}
	res, err := c.cl.Secrets(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up secret %q: %w", v, err)
	}
	var refs []string
	for _, s := range res.Items {
		if s.Name == v {
			refs = append(refs, s.Ref)
		}
	}
	return pickOne("secret", v, refs, "olivares vault list")
}

// readInput reads a file, or in for "-", up to max bytes.
func readInput(path string, in io.Reader, max int64) ([]byte, error) {
	var r io.Reader = in
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	raw, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("more than %d bytes", max)
	}
	return raw, nil
}

// maxSecretRead bounds a value read from standard input.
const maxSecretRead = 1 << 20
