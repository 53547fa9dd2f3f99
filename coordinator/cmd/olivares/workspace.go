package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The workspace commands, and the workspace administration commands named
// by the seeds (R-SETUP-13, R-PCS-18): olivares agent workspace ...
func workspaceCommands() []*command {
	return []*command{workspaceAdd(), {
		name: "workspace list", usage: "olivares workspace list [--json]\n",
		run: func(ctx context.Context, c *call) error {
			res, err := c.cl.Workspaces(ctx)
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "WORKSPACE\tNAME\tNODE\tPATH\tCREATED")
				for _, w := range res.Items {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Ref, w.Name, w.NodeID, w.Path, stamp(w.CreatedAt))
				}
				tw.Flush()
			})
		},
	},
		workspaceShow("workspace show", "olivares workspace show REF|NAME [--json]\n"),
		{name: "workspace delete", arg: "workspace ref or name",
			usage: "olivares workspace delete REF|NAME     remove a workspace no live run or unreleased worktree uses\n",
			run: func(ctx context.Context, c *call) error {
				ref, err := resolveWorkspace(ctx, c, c.arg)
				if err != nil {
					return err
				}
				if err := c.cl.DeleteWorkspace(ctx, ref); err != nil {
					return err
				}
				return c.emit(map[string]string{"deleted": ref}, func() {
					fmt.Fprintf(c.out, "workspace %s deleted (the directory stays on the node)\n", ref)
				})
			}},
		agentSetup(),
		agentApprove("agent workspace approve-setup", `olivares agent workspace approve-setup REF|NAME --sha256 HASH
    Approve the text you reviewed (admin, a person): worktree launches need it.
`),
		workspaceShow("agent workspace project-config", `olivares agent workspace project-config REF|NAME [--json]
    The agent configuration the repository carries that a tool would honour
    (hooks, MCP servers, base URLs, LD_PRELOAD ...), flagged per file, and its hash.
`),
		agentApprove("agent workspace approve-project-config", `olivares agent workspace approve-project-config REF|NAME --sha256 HASH
    Approve what you reviewed (admin, a person): tools that read flagged files
    start only while the approval matches.
`),
	}
}

type workspaceAddOpts struct {
	node, path, name string
	readOnly         bool
	subpaths         listFlag
	maxRead          int64
	dlp              string
}

func workspaceAdd() *command {
	var o workspaceAddOpts
	return &command{
		name: "workspace add",
		usage: `olivares workspace add --path DIR --name NAME [--node ID|HOST] [--read-only]
                       [--allow-subpath P ...] [--max-read-bytes N] [--dlp allow|deny] [--json]
    Register a directory on a node; DIR is a path on the node, sent as given.
    The file rules apply to what the API shows of it (diffs).
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.node, "node", "", "node (id or host name) the directory is on (default: the tenant's only node)")
			fs.StringVar(&o.path, "path", "", "absolute directory path on the node")
			fs.StringVar(&o.name, "name", "", "workspace name")
			fs.BoolVar(&o.readOnly, "read-only", false, "runs may not write it (no worktree launches)")
			fs.Var(&o.subpaths, "allow-subpath", "relative sub-path whose files the API may show, repeatable (default: all)")
			fs.Int64Var(&o.maxRead, "max-read-bytes", 0, "cap of a file read through the API (default 1 MiB)")
			fs.StringVar(&o.dlp, "dlp", "", "allow (default) or deny file reads through the API")
		},
		check: func(c *call) error { return c.required("path", "name") },
		run: func(ctx context.Context, c *call) error {
			node, err := resolveNode(ctx, c, o.node)
			if err != nil {
				return err
			}
			req := apitypes.WorkspaceCreate{NodeID: node, Path: o.path, Name: o.name, ReadOnly: o.readOnly,
				AllowedSubpaths: o.subpaths, MaxReadBytes: o.maxRead, DLP: o.dlp}
			w, err := c.cl.CreateWorkspace(ctx, req)
			if err != nil {
				return err
			}
			return c.emit(w, func() { printWorkspace(c.out, w) })
		},
	}
}

// workspaceShow is workspace show and agent workspace project-config.
func workspaceShow(name, usage string) *command {
	return &command{name: name, arg: "workspace ref or name", usage: usage, run: func(ctx context.Context, c *call) error {
		ref, err := resolveWorkspace(ctx, c, c.arg)
		if err != nil {
			return err
		}
		if name == "agent workspace project-config" {
			pc, err := c.cl.ProjectConfig(ctx, ref)
			if err != nil {
				return err
			}
			return c.emit(pc, func() { printProjectConfig(c.out, ref, pc) })
		}
		w, err := c.cl.Workspace(ctx, ref)
		if err != nil {
			return err
		}
		return c.emit(w, func() {
			printWorkspace(c.out, w)
			printSetup(c.out, w)
		})
	}}
}

func agentSetup() *command {
	var setup string
	return &command{
		name: "agent workspace setup", arg: "workspace ref or name",
		usage: `olivares agent workspace setup REF|NAME [--command TEXT] [--json]
    Show the workspace's setup command and its hash, or set it to the exact
    TEXT (admin; empty clears). Nothing runs it yet.
`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&setup, "command", "", "set the setup command to this exact text (empty clears); without it, show it")
		},
		run: func(ctx context.Context, c *call) error {
			ref, err := resolveWorkspace(ctx, c, c.arg)
			if err != nil {
				return err
			}
			var w apitypes.Workspace
			if c.set["command"] {
				w, err = c.cl.SetSetupCommand(ctx, ref, setup)
			} else {
				w, err = c.cl.Workspace(ctx, ref)
			}
			if err != nil {
				return err
			}
			return c.emit(w, func() { printSetup(c.out, w) })
		},
	}
}

// agentApprove is approve-setup and approve-project-config.
func agentApprove(name, usage string) *command {
	var sha string
	return &command{
		name: name, arg: "workspace ref or name", usage: usage,
		flags: func(fs *flag.FlagSet) { fs.StringVar(&sha, "sha256", "", "the sha256 of what you reviewed") },
		check: func(c *call) error { return c.required("sha256") },
		run: func(ctx context.Context, c *call) error {
			ref, err := resolveWorkspace(ctx, c, c.arg)
			if err != nil {
				return err
			}
			if name == "agent workspace approve-setup" {
				w, err := c.cl.ApproveSetup(ctx, ref, sha)
				if err != nil {
					return err
				}
				return c.emit(w, func() { printSetup(c.out, w) })
			}
			pc, err := c.cl.ApproveProjectConfig(ctx, ref, sha)
			if err != nil {
				return err
			}
			return c.emit(pc, func() { printProjectConfig(c.out, ref, pc) })
		},
	}
}

// resolveWorkspace is resolveProfile for workspaces.
func resolveWorkspace(ctx context.Context, c *call, v string) (string, error) {
	if strings.HasPrefix(v, workspaceRefPrefix) {
		return v, nil
	}
	res, err := c.cl.Workspaces(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up workspace %q: %w", v, err)
	}
	var refs []string
	for _, w := range res.Items {
		if w.Name == v {
			refs = append(refs, w.Ref+" on "+w.NodeID)
		}
	}
	return pickOne("workspace", v, refs, "olivares workspace list")
}

func printWorkspace(out io.Writer, w apitypes.Workspace) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "workspace\t%s\n", w.Ref)
	fmt.Fprintf(tw, "name\t%s\n", w.Name)
	fmt.Fprintf(tw, "node\t%s\n", w.NodeID)
	fmt.Fprintf(tw, "path\t%s\n", w.Path)
	fmt.Fprintf(tw, "read only\t%v\n", w.ReadOnly)
	fmt.Fprintf(tw, "allowed sub-paths\t%s\n", dash(strings.Join(w.AllowedSubpaths, ", ")))
	fmt.Fprintf(tw, "max read bytes\t%d\n", w.MaxReadBytes)
	fmt.Fprintf(tw, "dlp\t%s\n", dash(w.DLP))
	fmt.Fprintf(tw, "created\t%s\n", stamp(w.CreatedAt))
	tw.Flush()
}

// printSetup shows the setup command so a person can review it, with the
// hash to approve (R-SETUP-5, R-SETUP-13).
func printSetup(out io.Writer, w apitypes.Workspace) {
	if w.SetupCommand == nil || *w.SetupCommand == "" {
		fmt.Fprintf(out, "%s has no setup command\n", w.Ref)
		return
	}
	fmt.Fprintf(out, "setup command of %s (exact text between the lines):\n----\n%s\n----\nsha256: %s\n", w.Ref, *w.SetupCommand, w.SetupCommandSHA256)
	switch {
	case w.SetupApproved != nil && *w.SetupApproved:
		fmt.Fprintf(out, "approved by %s at %s\n", w.SetupApproval.Actor, stamp(w.SetupApproval.At))
	default:
		if w.SetupApproval != nil {
			fmt.Fprintf(out, "NOT approved (the last approval, of %s by %s at %s, was for other text)\n", w.SetupApproval.SHA256, w.SetupApproval.Actor, stamp(w.SetupApproval.At))
		} else {
			fmt.Fprintln(out, "NOT approved")
		}
		fmt.Fprintf(out, "to approve it after review: olivares agent workspace approve-setup %s --sha256 %s\n", w.Ref, w.SetupCommandSHA256)
	}
}

// printProjectConfig shows the flagged repository configuration of a
// workspace so a person can review it (R-PCS-10, R-PCS-11, R-PCS-18).
func printProjectConfig(out io.Writer, ref string, pc apitypes.ProjectConfig) {
	if len(pc.Files) == 0 {
		fmt.Fprintf(out, "%s carries no flagged agent configuration: every tool starts there as usual\n", ref)
		return
	}
	for _, f := range pc.Files {
		fmt.Fprintf(out, "%s (read by %s)\n", f.Path, strings.Join(f.Tools, ", "))
		if f.Unreadable != "" {
			fmt.Fprintf(out, "  unreadable (%s), flagged whole: %s\n", f.Unreadable, f.Detail)
		}
		for _, k := range f.Keys {
			fmt.Fprintf(out, "  %s = %s\n", k.Path, k.Value)
		}
	}
	fmt.Fprintf(out, "sha256: %s\n", pc.SHA256)
	switch {
	case pc.Approved:
		fmt.Fprintf(out, "approved by %s at %s\n", pc.Approval.Actor, stamp(pc.Approval.At))
	default:
		fmt.Fprintln(out, "NOT approved: tools that read these files will not start here")
		fmt.Fprintf(out, "to approve it after review: olivares agent workspace approve-project-config %s --sha256 %s\n", ref, pc.SHA256)
	}
}
