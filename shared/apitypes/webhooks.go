package apitypes

import (
	"encoding/json"
	"time"
)

// Webhook is a tenant's outgoing webhook as the API shows it (R-NOTIF-1):
// never its secret, but on creation.
type Webhook struct {
	ID      string   `json:"id"`
	URL     string   `json:"url"`
	Reasons []string `json:"reasons"`
	// ActAs is the person whose answer the webhook's action URLs give
	// (R-NOTIF-11); none: its deliveries carry no action URLs.
	ActAs string `json:"act_as,omitempty"`
	// Secret is the signing key, in the creation's answer only.
	Secret       string           `json:"secret,omitempty"`
	CreatedAt    time.Time        `json:"created_at"`
	LastDelivery *WebhookDelivery `json:"last_delivery,omitempty"`
}

// WebhookCreate is POST /webhooks.
type WebhookCreate struct {
	URL     string   `json:"url"`
	Reasons []string `json:"reasons,omitempty"`
	ActAs   string   `json:"act_as,omitempty"`
}

// WebhookList is GET /webhooks.
type WebhookList struct {
	Items []Webhook `json:"items"`
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// Webhook events.
const (
	WebhookEventAttention = "attention"
	WebhookEventTest      = "test"
)

// WebhookDelivery is one notification sent to a webhook and how it went
// (R-NOTIF-5).
type WebhookDelivery struct {
	ID        string `json:"id"`
	HookID    string `json:"hook_id"`
	Event     string `json:"event"`
	RunRef    string `json:"run_ref,omitempty"`
	Attention string `json:"attention,omitempty"`
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	// LastStatus is the HTTP status of the last attempt, 0 when none came.
	LastStatus int `json:"last_status,omitempty"`
	// LastResponse is the start of the last answer's body (1 KiB at most).
	LastResponse string     `json:"last_response,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	NextAttempt  *time.Time `json:"next_attempt_at,omitempty"`
}

// WebhookDeliveryList is GET /webhooks/{id}/deliveries.
type WebhookDeliveryList struct {
	Items []WebhookDelivery `json:"items"`
}

// WebhookPayload is the body of a delivery (R-NOTIF-3).
type WebhookPayload struct {
	ID        string          `json:"id"`
	Event     string          `json:"event"`
	At        time.Time       `json:"at"`
	Tenant    string          `json:"tenant"`
	Attention string          `json:"attention,omitempty"`
	Previous  string          `json:"previous_attention,omitempty"`
	Run       json.RawMessage `json:"run,omitempty"`
	// Request and Actions come with needs_decision (R-NOTIF-10,
	// R-NOTIF-11): what the tool asks, and per option a one-time signed
	// URL that settles it (a webhook with act_as only).
	Request *AskedRequest  `json:"request,omitempty"`
	Actions []ActionOption `json:"actions,omitempty"`
}

// AskedRequest is what a notification says of a pending request
// (R-NOTIF-10): the command and its directory, or the files and a short
// summary of the diff, or the question, each bounded so that a push
// fits its 4 KiB.
type AskedRequest struct {
	ID          string     `json:"id"`
	Kind        string     `json:"kind"`
	Tool        string     `json:"tool,omitempty"`
	Title       string     `json:"title"`
	Command     string     `json:"command,omitempty"`
	Cwd         string     `json:"cwd,omitempty"`
	Files       []string   `json:"files,omitempty"`
	DiffSummary string     `json:"diff_summary,omitempty"`
	Question    string     `json:"question,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	// Pending is how many requests of the run wait, this one included.
	Pending int `json:"pending"`
}

// ActionOption is one answer a notification offers (R-NOTIF-10): the
// tool's options reduced to allow once and deny, or answer (a question,
// answered in the console). A webhook's carries its signed URL.
type ActionOption struct {
	Action   string `json:"action"` // allow | deny | answer
	Title    string `json:"title"`
	OptionID string `json:"option_id,omitempty"`
	Decision string `json:"decision"`
	URL      string `json:"url,omitempty"`
}

// ActionOutcome is the answer of an action URL (R-NOTIF-11).
type ActionOutcome struct {
	Outcome string     `json:"outcome"` // settled | already_answered | expired
	Message string     `json:"message"`
	Request RunRequest `json:"request"`
}

// PushKey is GET /push/key: the coordinator's VAPID public key, the
// applicationServerKey a browser subscribes with (R-NOTIF-8).
type PushKey struct {
	PublicKey string `json:"public_key"`
}

// PushSubscriptionCreate is POST /push/subscriptions: what the browser's
// PushManager.subscribe gave, and the reasons the person wants.
type PushSubscriptionCreate struct {
	Endpoint string   `json:"endpoint"`
	Keys     PushKeys `json:"keys"`
	Reasons  []string `json:"reasons,omitempty"`
}

// PushKeys are a subscription's keys, base64url.
type PushKeys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// PushSubscription is one of the caller's Web Push subscriptions.
type PushSubscription struct {
	ID           string           `json:"id"`
	Endpoint     string           `json:"endpoint"`
	Reasons      []string         `json:"reasons"`
	CreatedAt    time.Time        `json:"created_at"`
	LastDelivery *WebhookDelivery `json:"last_delivery,omitempty"`
}

// PushSubscriptionList is GET /push/subscriptions.
type PushSubscriptionList struct {
	Items []PushSubscription `json:"items"`
}

// PushMessage is what a push carries, encrypted for the browser.
type PushMessage struct {
	Title     string `json:"title"`
	Body      string `json:"body"`
	RunRef    string `json:"run_ref,omitempty"`
	Attention string `json:"attention,omitempty"`
	URL       string `json:"url"`
	Tag       string `json:"tag"`
	// With needs_decision (R-NOTIF-10): the tenant, the request and the
	// buttons the service worker answers it with.
	Tenant  string         `json:"tenant,omitempty"`
	Request *AskedRequest  `json:"request,omitempty"`
	Actions []ActionOption `json:"actions,omitempty"`
}
