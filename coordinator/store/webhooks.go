package store

import (
	"context"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Webhook is a notification target of a tenant: an outgoing webhook
// (R-NOTIF-1; Kind ""), whose Secret is the HMAC key its deliveries are
// signed with, or a person's Web Push subscription (R-NOTIF-8; Kind
// KindWebPush), whose URL is the push service's endpoint.
type Webhook struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Kind      string    `json:"kind,omitempty"`
	URL       string    `json:"url"`
	Secret    string    `json:"secret,omitempty"`
	Reasons   []string  `json:"reasons,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// A Web Push subscription's person (the mark owner, R-PIN-6) and the
	// browser's keys.
	Owner  string `json:"owner,omitempty"`
	P256dh string `json:"p256dh,omitempty"`
	Auth   string `json:"auth,omitempty"`
	// A webhook's action URLs (R-NOTIF-11): the person their answers are
	// given as, and the coordinator's address they start with.
	ActAs      string `json:"act_as,omitempty"`
	ActionBase string `json:"action_base,omitempty"`
}

// KindWebPush marks a Web Push subscription among the targets.
const KindWebPush = "webpush"

// MaxDeliveries is how many deliveries a webhook's log keeps, newest
// first (R-NOTIF-5).
const MaxDeliveries = 50

// Webhooker stores the tenants' webhooks and their delivery logs.
type Webhooker interface {
	// CreateWebhook stores w and appends audit in one transaction.
	// ErrExists if w.ID is taken.
	CreateWebhook(ctx context.Context, w Webhook, audit apitypes.AuditEntry) error
	// GetWebhook returns one webhook; ErrNotFound if absent.
	GetWebhook(ctx context.Context, id string) (Webhook, error)
	// ListWebhooks lists a tenant's webhooks by id.
	ListWebhooks(ctx context.Context, tenant string) ([]Webhook, error)
	// DeleteWebhook removes the webhook and its deliveries and appends
	// audit, in one transaction. ErrNotFound if absent.
	DeleteWebhook(ctx context.Context, id string, audit apitypes.AuditEntry) error
	// PutDelivery stores d, replacing the delivery of the same hook and
	// id (each attempt updates it), and keeps the hook's newest
	// MaxDeliveries by CreatedAt. ErrNotFound if the hook is gone.
	PutDelivery(ctx context.Context, d apitypes.WebhookDelivery) error
	// ListDeliveries lists a hook's deliveries, newest first.
	ListDeliveries(ctx context.Context, hookID string) ([]apitypes.WebhookDelivery, error)
}
