package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The workspace administration commands named by the seeds (R-SETUP-13,
// R-PCS-18): `olivares agent workspace setup|approve-setup ...`.
func init() {
	groups["agent"] = "workspace"
	commands["workspace show"] = "workspace ref or name"
	commands["agent workspace setup"] = "workspace ref or name"
	commands["agent workspace approve-setup"] = "workspace ref or name"
	commands["agent workspace project-config"] = "workspace ref or name"
	commands["agent workspace approve-project-config"] = "workspace ref or name"
}

// agentWorkspaceWords are the third words of `olivares agent workspace`.
var agentWorkspaceWords = "setup, approve-setup, project-config or approve-project-config"

// runWorkspaces runs the workspace commands; ok is false for another one.
func runWorkspaces(ctx context.Context, cl *apiclient.Client, cmd, arg string, o *cmdOpts, out io.Writer, emit func(any, func()) error) (bool, error) {
	switch cmd {
	case "workspace show", "agent workspace setup", "agent workspace approve-setup":
	case "agent workspace project-config", "agent workspace approve-project-config":
		return true, runProjectConfig(ctx, cl, cmd, arg, o, out, emit)
	default:
		return false, nil
	}
	ref, err := resolveWorkspace(ctx, cl, arg)
	if err != nil {
		return true, err
	}
	var w apitypes.Workspace
	switch {
	case cmd == "agent workspace setup" && o.set["command"]:
		w, err = cl.SetSetupCommand(ctx, ref, o.command)
	case cmd == "agent workspace approve-setup":
		w, err = cl.ApproveSetup(ctx, ref, o.sha256)
	default:
		w, err = cl.Workspace(ctx, ref)
	}
	if err != nil {
		return true, err
	}
	return true, emit(w, func() {
		if cmd == "workspace show" {
			printWorkspace(out, w)
		}
		printSetup(out, w)
	})
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

// runProjectConfig shows the flagged repository configuration of a
// workspace so a person can review it, or approves the hash they reviewed
// (R-PCS-10, R-PCS-11, R-PCS-18).
func runProjectConfig(ctx context.Context, cl *apiclient.Client, cmd, arg string, o *cmdOpts, out io.Writer, emit func(any, func()) error) error {
	ref, err := resolveWorkspace(ctx, cl, arg)
	if err != nil {
		return err
	}
	var pc apitypes.ProjectConfig
	if cmd == "agent workspace approve-project-config" {
		pc, err = cl.ApproveProjectConfig(ctx, ref, o.sha256)
	} else {
		pc, err = cl.ProjectConfig(ctx, ref)
	}
	if err != nil {
		return err
	}
	return emit(pc, func() {
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
	})
}
