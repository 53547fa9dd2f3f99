package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Webhooks: webhooks holds each under its id; webhook_deliveries holds
// each delivery under lp(hook id) + the delivery id.
var (
	bucketWebhooks   = []byte("webhooks")
	bucketDeliveries = []byte("webhook_deliveries")
)

func init() { markBuckets = append(markBuckets, bucketWebhooks, bucketDeliveries) }

var _ store.Webhooker = (*Store)(nil)

// CreateWebhook implements store.Webhooker.
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook, audit apitypes.AuditEntry) error {
	if w.ID == "" || w.Tenant == "" {
		return fmt.Errorf("create webhook: empty id or tenant")
	}
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketWebhooks)
		if b.Get([]byte(w.ID)) != nil {
			return fmt.Errorf("webhook %q: %w", w.ID, store.ErrExists)
		}
		if err := put(b, w.ID, w); err != nil {
			return err
		}
		_, err := appendAuditTx(tx, audit)
		return err
	})
}

// GetWebhook implements store.Webhooker.
func (s *Store) GetWebhook(ctx context.Context, id string) (store.Webhook, error) {
	var w store.Webhook
	err := s.view(ctx, func(tx *bbolt.Tx) error { return get(tx.Bucket(bucketWebhooks), id, &w) })
	if err != nil {
		return store.Webhook{}, fmt.Errorf("webhook %q: %w", id, err)
	}
	return w, nil
}

// ListWebhooks implements store.Webhooker.
func (s *Store) ListWebhooks(ctx context.Context, tenant string) ([]store.Webhook, error) {
	var out []store.Webhook
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketWebhooks).ForEach(func(k, v []byte) error {
			var w store.Webhook
			if err := json.Unmarshal(v, &w); err != nil {
				return fmt.Errorf("webhook %q: %w", k, err)
			}
			if w.Tenant == tenant {
				out = append(out, w)
			}
			return nil
		})
	})
	return out, err
}

// DeleteWebhook implements store.Webhooker.
func (s *Store) DeleteWebhook(ctx context.Context, id string, audit apitypes.AuditEntry) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketWebhooks)
		var w store.Webhook
		if err := get(b, id, &w); err != nil {
			return fmt.Errorf("webhook %q: %w", id, err)
		}
		if w.Tenant != audit.Tenant {
			return fmt.Errorf("delete webhook %q: audit entry of another tenant", id)
		}
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
		d := tx.Bucket(bucketDeliveries)
		prefix := lp(id)
		c := d.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := d.Delete(k); err != nil {
				return err
			}
		}
		_, err := appendAuditTx(tx, audit)
		return err
	})
}

// PutDelivery implements store.Webhooker.
func (s *Store) PutDelivery(ctx context.Context, dv apitypes.WebhookDelivery) error {
	return s.update(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketWebhooks).Get([]byte(dv.HookID)) == nil {
			return fmt.Errorf("webhook %q: %w", dv.HookID, store.ErrNotFound)
		}
		d := tx.Bucket(bucketDeliveries)
		prefix := lp(dv.HookID)
		if err := put(d, string(append(append([]byte(nil), prefix...), dv.ID...)), dv); err != nil {
			return err
		}
		all, err := deliveriesOf(d, prefix)
		if err != nil {
			return err
		}
		for _, old := range all[min(len(all), store.MaxDeliveries):] {
			if err := d.Delete(append(append([]byte(nil), prefix...), old.ID...)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListDeliveries implements store.Webhooker.
func (s *Store) ListDeliveries(ctx context.Context, hookID string) ([]apitypes.WebhookDelivery, error) {
	var out []apitypes.WebhookDelivery
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		out, err = deliveriesOf(tx.Bucket(bucketDeliveries), lp(hookID))
		return err
	})
	return out, err
}

// deliveriesOf reads a hook's deliveries, newest first (then by id).
func deliveriesOf(b *bbolt.Bucket, prefix []byte) ([]apitypes.WebhookDelivery, error) {
	var out []apitypes.WebhookDelivery
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var dv apitypes.WebhookDelivery
		if err := json.Unmarshal(v, &dv); err != nil {
			return nil, fmt.Errorf("delivery %q: %w", k, err)
		}
		out = append(out, dv)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	return out, nil
}
