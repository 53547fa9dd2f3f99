package fleet

import (
	"context"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// indexUsage stores the usage rows an agent pushed (R-USE-6). Like run
// rows, their node and tenant come from the tunnel's identity; a row of a
// run the index does not hold as this node's is dropped, so an agent can
// only report usage of its own runs.
func (f *Fleet) indexUsage(ctx context.Context, nodeID string, rows []apitypes.UsageTurn) error {
	if len(rows) == 0 {
		return nil
	}
	n, err := f.store.GetNode(ctx, nodeID)
	if err != nil {
		return err
	}
	refs := map[string]bool{}
	for _, u := range rows {
		refs[u.RunRef] = true
	}
	list := make([]string, 0, len(refs))
	for ref := range refs {
		list = append(list, ref)
	}
	runs, err := f.store.GetRuns(ctx, list)
	if err != nil {
		return err
	}
	keep := make([]apitypes.UsageTurn, 0, len(rows))
	for _, u := range rows {
		r, ok := runs[u.RunRef]
		if !ok || r.NodeID != nodeID || r.Tenant != n.Tenant || u.Seq == 0 {
			f.log.Warn("usage row refused", logging.KeyNodeID, nodeID, logging.KeyRunRef, u.RunRef)
			continue
		}
		u.NodeID, u.Tenant = nodeID, n.Tenant
		keep = append(keep, u)
	}
	return f.store.PutUsage(ctx, keep)
}
