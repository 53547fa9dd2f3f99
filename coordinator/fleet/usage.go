package fleet

import (
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// usageOf keeps the usage rows an agent pushed that it may report
// (R-USE-6). Like run rows, their node and tenant come from the tunnel's
// identity n; a row is kept when its run is indexed as this node's
// (stored, the rows before the push) or comes in the same push (pushed),
// so an agent can only report usage of its own runs.
func (f *Fleet) usageOf(n store.Node, rows []apitypes.UsageTurn, stored map[string]apitypes.Run, pushed map[string]bool) []apitypes.UsageTurn {
	keep := make([]apitypes.UsageTurn, 0, len(rows))
	for _, u := range rows {
		r, ok := stored[u.RunRef]
		mine := ok && r.NodeID == n.ID && r.Tenant == n.Tenant || !ok && pushed[u.RunRef]
		if !mine || u.Seq == 0 {
			f.log.Warn("usage row refused", logging.KeyNodeID, n.ID, logging.KeyRunRef, u.RunRef)
			continue
		}
		u.NodeID, u.Tenant = n.ID, n.Tenant
		keep = append(keep, u)
	}
	return keep
}
