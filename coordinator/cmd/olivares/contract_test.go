package main

import (
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The fakes of these tests stand in for the coordinator and are checked
// against openapi.yaml like it is (fakeAPI). answered fills the fields the
// coordinator always sends and a test leaves zero, so that each fake states
// only what its test is about and still answers a whole object.
func answered(v any) any {
	switch x := v.(type) {
	case apitypes.Run:
		return completeRun(x)
	case apitypes.RunList:
		items := make([]apitypes.Run, len(x.Items))
		for i, r := range x.Items {
			items[i] = completeRun(r)
		}
		x.Items = items
		return x
	case apitypes.HandoffResponse:
		x.Run = completeRun(x.Run)
		return x
	case apitypes.Profile:
		return completeProfile(x)
	case apitypes.ProfileList:
		items := make([]apitypes.Profile, len(x.Items))
		for i, p := range x.Items {
			items[i] = completeProfile(p)
		}
		x.Items = items
		return x
	case apitypes.Workspace:
		return completeWorkspace(x)
	case apitypes.WorkspaceList:
		items := make([]apitypes.Workspace, len(x.Items))
		for i, w := range x.Items {
			items[i] = completeWorkspace(w)
		}
		x.Items = items
		return x
	}
	return v
}

var fakeCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func completeRun(r apitypes.Run) apitypes.Run {
	if r.Tenant == "" {
		r.Tenant = testTenant
	}
	if r.NodeID == "" {
		r.NodeID = "n1"
	}
	if r.Driver == "" {
		r.Driver = "claude"
	}
	if r.Isolation == "" {
		r.Isolation = apitypes.IsolationNative
	}
	if r.ProviderProfileRef == "" {
		r.ProviderProfileRef = "prof_1"
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = fakeCreated
	}
	if r.CodexBinding != nil {
		b := *r.CodexBinding
		if b.SourceHost == "" {
			b.SourceHost = "n1"
		}
		if b.SourceThreadID == "" {
			b.SourceThreadID = "01a23643-8a79-7b72-93b2-655098698f6d"
		}
		r.CodexBinding = &b
	}
	return r
}

func completeProfile(p apitypes.Profile) apitypes.Profile {
	if p.Tenant == "" {
		p.Tenant = testTenant
	}
	if p.Tool == "" {
		p.Tool = "claude"
	}
	if p.Home == "" {
		p.Home = "/home/" + p.Ref
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = fakeCreated
	}
	if p.Approvals == "" {
		p.Approvals = apitypes.ApprovalsAsk
	}
	if p.AskTimeout == "" {
		p.AskTimeout = "10m0s"
	}
	return p
}

func completeWorkspace(w apitypes.Workspace) apitypes.Workspace {
	if w.Tenant == "" {
		w.Tenant = testTenant
	}
	if w.Path == "" {
		w.Path = "/src/" + w.Name
	}
	if w.MaxReadBytes == 0 {
		w.MaxReadBytes = apitypes.DefaultMaxReadBytes
	}
	if w.DLP == "" {
		w.DLP = apitypes.DLPAllow
	}
	if w.CreatedAt.IsZero() {
		w.CreatedAt = fakeCreated
	}
	return w
}
