package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

func init() {
	groups["vault"] = "add, list or delete"
	commands["vault add"] = "secret name"
	commands["vault list"] = ""
	commands["vault delete"] = "secret ref"
}

// grantFlag collects --grant KIND:SECRET_REF:ENV[:file] (R-GRANT-1).
type grantFlag []apitypes.Grant

func (g *grantFlag) String() string { return fmt.Sprint(len(*g)) }

func (g *grantFlag) Set(s string) error {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 4 || (len(parts) == 4 && parts[3] != "file") {
		return errors.New("want KIND:SECRET_REF:ENV or KIND:SECRET_REF:ENV:file")
	}
	*g = append(*g, apitypes.Grant{Kind: parts[0], SecretRef: parts[1], Env: parts[2], AsFile: len(parts) == 4})
	return nil
}

// runVault runs the vault commands; ok is false for another one. A value
// is read from a file or standard input, never from the command line,
// where other users could see it.
func runVault(ctx context.Context, cl *apiclient.Client, cmd, arg string, o *cmdOpts, in io.Reader, out io.Writer, emit func(any, func()) error) (bool, error) {
	switch cmd {
	case "vault add":
		var raw []byte
		var err error
		if o.valueFile == "-" {
			raw, err = io.ReadAll(io.LimitReader(in, maxSecretRead))
		} else {
			raw, err = os.ReadFile(o.valueFile)
		}
		if err != nil {
			return true, fmt.Errorf("vault add: reading the value: %w", err)
		}
		v := strings.TrimSuffix(string(raw), "\n")
		sec, err := cl.CreateSecret(ctx, arg, v)
		if err != nil {
			return true, err
		}
		return true, emit(sec, func() { fmt.Fprintf(out, "secret %s (%s) stored\n", sec.Ref, sec.Name) })
	case "vault list":
		l, err := cl.Secrets(ctx)
		if err != nil {
			return true, err
		}
		return true, emit(l, func() {
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SECRET\tNAME\tCREATED")
			for _, s := range l.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Ref, s.Name, stamp(s.CreatedAt))
			}
			tw.Flush()
		})
	case "vault delete":
		if err := cl.DeleteSecret(ctx, arg); err != nil {
			return true, err
		}
		return true, emit(map[string]any{"ref": arg, "deleted": true}, func() { fmt.Fprintf(out, "%s deleted\n", arg) })
	}
	return false, nil
}

// maxSecretRead bounds a value read from standard input.
const maxSecretRead = 1 << 20
