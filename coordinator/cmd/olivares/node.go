package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The node commands: the tenant's enrolled hosts.
func nodeCommands() []*command {
	return []*command{
		{name: "node list", usage: "olivares node list [--json]\n", run: func(ctx context.Context, c *call) error {
			res, err := c.cl.Nodes(ctx)
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "NODE\tHOST\t%s\tTRANSPORT\tLAST HEARTBEAT\tCERT EXPIRES\n", c.tty.cell(sgrHeader, "STATE"))
				for _, an := range res.Items {
					n := node{an}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, dash(n.Hostname), c.tty.nodeState(n.state()), dash(n.Transport), ago(n.LastHeartbeat), n.CertNotAfter.Format(time.RFC3339))
				}
				tw.Flush()
			})
		}},
		nodeShow("node show", "olivares node show ID|HOST [--json]\n", false),
		nodeShow("node revoke", "olivares node revoke ID|HOST [--json]      cut the node off now and for good (admin)\n", true),
		{name: "node forget", arg: "node id or host name", usage: `olivares node forget ID|HOST [--json]
    Remove a revoked node from the registry, with its profiles and workspaces.
`, run: func(ctx context.Context, c *call) error {
			id, err := resolveAnyNode(ctx, c, c.arg)
			if err != nil {
				return err
			}
			res, err := c.cl.ForgetNode(ctx, id)
			if err != nil {
				return err
			}
			return c.emit(res, func() {
				fmt.Fprintf(c.out, "node %s forgotten, with %d profile(s) and %d workspace(s) registered on it; its runs stay as history\n",
					res.ID, res.ProfilesRemoved, res.WorkspacesRemoved)
			})
		}},
	}
}

func nodeShow(name, usage string, revoke bool) *command {
	return &command{name: name, arg: "node id or host name", usage: usage, run: func(ctx context.Context, c *call) error {
		get := c.cl.Node
		if revoke {
			get = c.cl.RevokeNode
		}
		id, err := resolveAnyNode(ctx, c, c.arg)
		if err != nil {
			return err
		}
		an, err := get(ctx, id)
		if err != nil {
			return err
		}
		n := node{an}
		return c.emit(n, func() { n.print(c.out) })
	}}
}

type node struct{ apitypes.Node }

func (n node) state() string { return n.State() }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ago(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

func (n node) print(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "node\t%s\n", n.ID)
	fmt.Fprintf(tw, "tenant\t%s\n", n.Tenant)
	fmt.Fprintf(tw, "host\t%s\n", dash(n.Hostname))
	fmt.Fprintf(tw, "state\t%s\n", n.state())
	fmt.Fprintf(tw, "transport\t%s\n", dash(n.Transport))
	if n.ConnectedSince != nil {
		fmt.Fprintf(tw, "connected since\t%s\n", n.ConnectedSince.Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "last heartbeat\t%s\n", ago(n.LastHeartbeat))
	fmt.Fprintf(tw, "agent version\t%s\n", dash(n.AgentVersion))
	fmt.Fprintf(tw, "enrolled\t%s\n", n.EnrolledAt.Format(time.RFC3339))
	fmt.Fprintf(tw, "certificate\t%s, expires %s\n", n.CertSerial, n.CertNotAfter.Format(time.RFC3339))
	if n.RevokedAt != nil {
		fmt.Fprintf(tw, "revoked\t%s\n", n.RevokedAt.Format(time.RFC3339))
	}
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "label\t%s=%s\n", k, n.Labels[k])
	}
	var caps struct {
		PTY    bool   `json:"pty"`
		Podman string `json:"podman"`
		Docker string `json:"docker"`
		WT     bool   `json:"worktree_dir_configured"`
		// R-TR-7: whether isolation=sandbox and container run there, and
		// why not.
		Sandbox        bool   `json:"sandbox"`
		SandboxError   string `json:"sandbox_error"`
		Container      bool   `json:"container"`
		ContainerError string `json:"container_error"`
		CLIs           []struct {
			Name, Version string
		} `json:"clis"`
	}
	if json.Unmarshal(n.Capabilities, &caps) == nil {
		fmt.Fprintf(tw, "pty\t%v\n", caps.PTY)
		fmt.Fprintf(tw, "podman / docker\t%s / %s\n", dash(caps.Podman), dash(caps.Docker))
		fmt.Fprintf(tw, "worktree dir\t%v\n", caps.WT)
		if caps.Sandbox {
			fmt.Fprintf(tw, "sandbox\tyes (bubblewrap)\n")
		} else {
			fmt.Fprintf(tw, "sandbox\tno: %s\n", dash(caps.SandboxError))
		}
		if caps.Container {
			fmt.Fprintf(tw, "container\tyes (podman)\n")
		} else {
			fmt.Fprintf(tw, "container\tno: %s\n", dash(caps.ContainerError))
		}
		for _, c := range caps.CLIs {
			fmt.Fprintf(tw, "cli %s\t%s\n", c.Name, dash(c.Version))
		}
	}
	tw.Flush()
}

// resolveNode is the node a --node value names: a node id, or the host
// name of one node; "" is the tenant's only node that is not revoked
// (R-CLI-5).
func resolveNode(ctx context.Context, c *call, v string) (string, error) {
	res, err := c.cl.Nodes(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up the nodes: %w", err)
	}
	var live, byHost []string
	for _, n := range res.Items {
		if n.ID == v && v != "" {
			return n.ID, nil
		}
		if n.RevokedAt != nil {
			continue
		}
		live = append(live, n.ID)
		if v != "" && n.Hostname == v {
			byHost = append(byHost, n.ID)
		}
	}
	if v != "" {
		switch len(byHost) {
		case 0:
			return "", notFound{fmt.Errorf("no node has the id or host name %q; see olivares node list", v)}
		case 1:
			return byHost[0], nil
		}
		return "", fmt.Errorf("%d nodes have the host name %q (%s); pass the node id instead", len(byHost), v, strings.Join(byHost, ", "))
	}
	switch len(live) {
	case 1:
		return live[0], nil
	case 0:
		return "", errors.New("the tenant has no enrolled node; enroll one (olivares-coordinator token create, then olivares-agent enroll)")
	}
	return "", usageError{fmt.Errorf("%s: the tenant has %d nodes (%s); pass --node", c.cmd.name, len(live), strings.Join(live, ", "))}
}

// resolveAnyNode is the node v names, revoked ones included: v itself when
// it starts like a node id, else the one node whose host name is v.
func resolveAnyNode(ctx context.Context, c *call, v string) (string, error) {
	if strings.HasPrefix(v, nodeIDPrefix) {
		return v, nil
	}
	res, err := c.cl.Nodes(ctx)
	if err != nil {
		return "", fmt.Errorf("looking up node %q: %w", v, err)
	}
	var ids []string
	for _, n := range res.Items {
		if n.ID == v {
			return n.ID, nil
		}
		if n.Hostname == v {
			ids = append(ids, n.ID)
		}
	}
	if len(ids) > 1 {
		return "", fmt.Errorf("%d nodes have the host name %q (%s); pass the node id instead", len(ids), v, strings.Join(ids, ", "))
	}
	return pickOne("node", v, ids, "olivares node list")
}

// nodeIDPrefix starts every node id.
const nodeIDPrefix = "node-"
