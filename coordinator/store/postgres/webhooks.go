package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

var _ store.Webhooker = (*Store)(nil)

// CreateWebhook implements store.Webhooker.
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook, audit apitypes.AuditEntry) error {
	if w.ID == "" || w.Tenant == "" {
		return fmt.Errorf("create webhook: empty id or tenant")
	}
	if !textOK(w.ID, w.Tenant, w.URL, w.Secret) {
		return fmt.Errorf("create webhook: a value a text column cannot hold")
	}
	doc, err := encode(w)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO webhooks (id, tenant, doc) VALUES ($1, $2, $3)", w.ID, w.Tenant, doc); err != nil {
			if _, ok := uniqueViolation(err); ok {
				return fmt.Errorf("webhook %q: %w", w.ID, store.ErrExists)
			}
			return err
		}
		_, err := appendAuditTx(ctx, tx, audit)
		return err
	})
}

// GetWebhook implements store.Webhooker.
func (s *Store) GetWebhook(ctx context.Context, id string) (store.Webhook, error) {
	var w store.Webhook
	if !textOK(id) {
		return w, fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
	}
	db, err := s.q()
	if err != nil {
		return w, err
	}
	if err := scanDoc(db.QueryRow(ctx, "SELECT doc FROM webhooks WHERE id = $1", id), &w); err != nil {
		return store.Webhook{}, fmt.Errorf("webhook %q: %w", id, closedErr(s, err))
	}
	return w, nil
}

// ListWebhooks implements store.Webhooker.
func (s *Store) ListWebhooks(ctx context.Context, tenant string) ([]store.Webhook, error) {
	if !textOK(tenant) {
		return nil, nil
	}
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT doc FROM webhooks WHERE tenant = $1 ORDER BY id", tenant)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", closedErr(s, err))
	}
	defer rows.Close()
	var out []store.Webhook
	for rows.Next() {
		var w store.Webhook
		if err := scanDoc(rows, &w); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, closedErr(s, rows.Err())
}

// DeleteWebhook implements store.Webhooker.
func (s *Store) DeleteWebhook(ctx context.Context, id string, audit apitypes.AuditEntry) error {
	if !textOK(id) {
		return fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var tenant string
		err := tx.QueryRow(ctx, "SELECT tenant FROM webhooks WHERE id = $1 FOR UPDATE", id).Scan(&tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("webhook %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if tenant != audit.Tenant {
			return fmt.Errorf("delete webhook %q: audit entry of another tenant", id)
		}
		// Its deliveries go with it (ON DELETE CASCADE).
		if _, err := tx.Exec(ctx, "DELETE FROM webhooks WHERE id = $1", id); err != nil {
			return err
		}
		_, err = appendAuditTx(ctx, tx, audit)
		return err
	})
}

// PutDelivery implements store.Webhooker.
func (s *Store) PutDelivery(ctx context.Context, d apitypes.WebhookDelivery) error {
	if !textOK(d.HookID, d.ID, d.LastResponse, d.LastError) {
		return fmt.Errorf("put delivery: a value a text column cannot hold")
	}
	doc, err := encode(d)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (hook_id, id, created_at, doc) VALUES ($1, $2, $3, $4)
			ON CONFLICT (hook_id, id) DO UPDATE SET doc = EXCLUDED.doc`, d.HookID, d.ID, d.CreatedAt, doc)
		if foreignKeyViolation(err) {
			return fmt.Errorf("webhook %q: %w", d.HookID, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM webhook_deliveries WHERE hook_id = $1 AND (created_at, id) NOT IN
			(SELECT created_at, id FROM webhook_deliveries WHERE hook_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2)`,
			d.HookID, store.MaxDeliveries)
		return err
	})
}

// ListDeliveries implements store.Webhooker.
func (s *Store) ListDeliveries(ctx context.Context, hookID string) ([]apitypes.WebhookDelivery, error) {
	if !textOK(hookID) {
		return nil, nil
	}
	db, err := s.q()
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, "SELECT doc FROM webhook_deliveries WHERE hook_id = $1 ORDER BY created_at DESC, id DESC", hookID)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", closedErr(s, err))
	}
	defer rows.Close()
	var out []apitypes.WebhookDelivery
	for rows.Next() {
		var d apitypes.WebhookDelivery
		if err := scanDoc(rows, &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, closedErr(s, rows.Err())
}
